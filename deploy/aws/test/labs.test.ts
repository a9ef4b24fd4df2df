// The synthesized templates: every property of test/checks.ts holds on the labs as built, and
// fails on a copy broken on purpose (a node out of the placement group, an open port, a
// missing peer, a wider grant, a missing relay group or TGW member, a repeated shard).
import { spawnSync } from 'child_process';
import * as cdk from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { LatencyLab, LatencyLabProps, Multicast } from '../lib/latency-lab';
import { LoadLab, LoadLabProps, checkStartAt, defaultStartAt, parseShaping } from '../lib/load-lab';
import {
  Json, checkIam, checkIngress, checkNatShaping, checkPeers, checkPlacement, checkRelay, checkShards, checkTgw,
  clone, heredoc, nodes, userData,
} from './checks';

const GROUPS = ['239.255.79.1:7877', '239.255.79.3:7882'];
const REPLY = '239.255.79.2:7881';
const START = '2026-12-01T09:30:00Z';

function latency(multicast: Multicast, over: Partial<LatencyLabProps> = {}): Template {
  const app = new cdk.App();
  const stack = new LatencyLab(app, 'Lab', {
    nodes: 4, instanceType: 'c6in.xlarge', az: 'us-east-1a', multicast, groups: GROUPS, replyGroup: REPLY, ...over,
  });
  return Template.fromStack(stack);
}

function load(over: Partial<LoadLabProps> = {}): Template {
  const app = new cdk.App();
  const stack = new LoadLab(app, 'Load', {
    shards: 4, instanceType: 'c6i.large', roomInstanceType: 'c6i.large', az: 'us-east-1a',
    link: '60.76mbit/10ms', extraArgs: '--seed 1', startAt: START, ...over,
  });
  return Template.fromStack(stack);
}

const relay = latency('relay');
const tgw = latency('tgw');
const plain = latency('none');
const loadLab = load();
const natLab = load({ shaping: 'nat' });
const ALL: [string, Template][] = [['relay', relay], ['tgw', tgw], ['none', plain], ['load', loadLab], ['load nat', natLab]];
const CARRIED = [...GROUPS, REPLY];

/** The first resource of a type in a template's JSON. */
function first(t: Json, type: string): [string, Json] {
  return Object.entries(t.Resources as Record<string, Json>).find(([, r]) => r.Type === type)!;
}

/** Replaces text in one node's user data (its Fn::Join parts). */
function editUserData(t: Json, id: string, from: string | RegExp, to: string): Json {
  const parts: Json[] = t.Resources[id].Properties.UserData['Fn::Base64']['Fn::Join'][1];
  const before = JSON.stringify(parts);
  t.Resources[id].Properties.UserData['Fn::Base64']['Fn::Join'][1] = parts.map((p) => (typeof p === 'string' ? p.replace(from, to) : p));
  expect(JSON.stringify(t.Resources[id].Properties.UserData['Fn::Base64']['Fn::Join'][1])).not.toEqual(before);
  return t;
}

describe('placement group', () => {
  test.each([['relay', relay], ['tgw', tgw], ['none', plain]])('%s: cluster, every node in it', (_, t) => {
    t.hasResourceProperties('AWS::EC2::PlacementGroup', { Strategy: 'cluster' });
    t.resourceCountIs('AWS::EC2::Instance', 4);
    checkPlacement(t.toJSON());
  });
  test('fails with a node left out', () => {
    const t = clone(relay.toJSON());
    const id = nodes(t, 'node')[1].id;
    delete t.Resources[id].Properties.PlacementGroupName;
    expect(() => checkPlacement(t)).toThrow(`${id} is not in the placement group`);
  });
  test('fails with a spread group', () => {
    const t = clone(relay.toJSON());
    first(t, 'AWS::EC2::PlacementGroup')[1].Properties.Strategy = 'spread';
    expect(() => checkPlacement(t)).toThrow('strategy spread');
  });
});

describe('ingress', () => {
  test.each(ALL)('%s: only from the lab nodes, no public address, no key', (_, t) => {
    checkIngress(t.toJSON());
    t.resourceCountIs('AWS::EC2::InternetGateway', 0);
    t.resourceCountIs('AWS::EC2::NatGateway', 0);
  });
  test.each([['0.0.0.0/0', 'CidrIp'], ['::/0', 'CidrIpv6']])('fails with a port open to %s', (cidr, key) => {
    const t = clone(relay.toJSON());
    const [sgId] = first(t, 'AWS::EC2::SecurityGroupIngress')[1].Properties.GroupId['Fn::GetAtt'];
    t.Resources.Broken = { Type: 'AWS::EC2::SecurityGroupIngress', Properties: { GroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] }, IpProtocol: 'tcp', FromPort: 22, ToPort: 22, [key]: cidr } };
    expect(() => checkIngress(t)).toThrow(`ingress from anywhere (${cidr})`);
  });
  test('fails with a rule inline in a group, from the VPC range', () => {
    const t = clone(load().toJSON());
    const [, sg] = first(t, 'AWS::EC2::SecurityGroup');
    sg.Properties.SecurityGroupIngress = [{ IpProtocol: 'tcp', FromPort: 8080, ToPort: 8080, CidrIp: '10.0.0.0/8' }];
    expect(() => checkIngress(t)).toThrow('from an address range (10.0.0.0/8)');
  });
});

describe('peers', () => {
  test.each([['relay', relay], ['tgw', tgw], ['none', plain]])('%s: every node lists every other', (_, t) => {
    checkPeers(t.toJSON());
    const n = nodes(t.toJSON(), 'node');
    expect(n.map((x) => x.addr)).toEqual(['10.42.0.11', '10.42.0.12', '10.42.0.13', '10.42.0.14']);
    expect(n[2].ud).toContain('10.42.0.12:7878 name=node2 zone=us-east-1a');
    expect(n[2].ud).toContain('systemctl enable --now wirebench-mesh.service wirebench-serve.service');
  });
  test('fails with a peer missing', () => {
    const t = clone(relay.toJSON());
    const n3 = nodes(t, 'node')[2];
    editUserData(t, n3.id, '10.42.0.14:7878 name=node4 zone=us-east-1a\n', '');
    expect(() => checkPeers(t)).toThrow('node3: peers 10.42.0.11,10.42.0.12, want 10.42.0.11,10.42.0.12,10.42.0.14');
  });
  test('fails with a node listing itself', () => {
    const t = clone(plain.toJSON());
    const n1 = nodes(t, 'node')[0];
    editUserData(t, n1.id, '10.42.0.12:7878', '10.42.0.11:7878');
    expect(() => checkPeers(t)).toThrow('node1: peers');
  });
  test('a 100-node relay lab fits user data; 101 is refused', () => {
    const t = latency('relay', { nodes: 100 }).toJSON();
    checkPeers(t);
    const sizes = nodes(t, 'node').map((n) => Buffer.byteLength(n.ud));
    expect(Math.max(...sizes)).toBeLessThan(16384 - 512);
    expect(() => latency('relay', { nodes: 101 })).toThrow('nodes: 101 is not a whole number from 2 to 100');
  });
});

describe('IAM', () => {
  test.each(ALL)('%s: SSM core, the result bucket, the token and the binary only', (_, t) => {
    checkIam(t.toJSON());
    t.hasResourceProperties('AWS::IAM::Role', {
      ManagedPolicyArns: [{ 'Fn::Join': ['', Match.arrayWith([':iam::aws:policy/AmazonSSMManagedInstanceCore'])] }],
    });
  });
  test('fails with another managed policy', () => {
    const t = clone(relay.toJSON());
    first(t, 'AWS::IAM::Role')[1].Properties.ManagedPolicyArns.push('arn:aws:iam::aws:policy/AdministratorAccess');
    expect(() => checkIam(t)).toThrow('not SSM core alone');
  });
  test('fails with a grant on every resource', () => {
    const t = clone(loadLab.toJSON());
    first(t, 'AWS::IAM::Policy')[1].Properties.PolicyDocument.Statement.push({ Effect: 'Allow', Action: 's3:GetObject', Resource: '*' });
    expect(() => checkIam(t)).toThrow('s3:GetObject on every resource');
  });
  test('fails with a write to the binary', () => {
    const t = clone(tgw.toJSON());
    const st = first(t, 'AWS::IAM::Policy')[1].Properties.PolicyDocument.Statement as Json[];
    const asset = st.find((s) => JSON.stringify(s.Resource).includes('cdk-hnb659fds-assets-'));
    asset.Action = ([] as string[]).concat(asset.Action, 's3:PutObject');
    expect(() => checkIam(t)).toThrow('on the asset bucket');
  });
});

describe('multicast', () => {
  test('relay: every node relays every group to the others', () => {
    checkRelay(relay.toJSON(), CARRIED);
    const n = nodes(relay.toJSON(), 'node');
    expect(n[0].ud).toContain(`WIREBENCH_SERVE_ARGS=--listen 0.0.0.0:7879 --join ${GROUPS[0]} --join ${GROUPS[1]} --reply-group ${REPLY} --interface 10.42.0.11`);
  });
  test('relay fails with a group missing on one node', () => {
    const t = clone(relay.toJSON());
    editUserData(t, nodes(t, 'node')[3].id, ` --group ${GROUPS[1]}`, '');
    expect(() => checkRelay(t, CARRIED)).toThrow(`node4: the relay does not carry ${GROUPS[1]}`);
  });
  test('relay fails with the relay port closed', () => {
    const t = clone(relay.toJSON());
    const [id] = Object.entries(t.Resources as Record<string, Json>).find(([, r]) => r.Type === 'AWS::EC2::SecurityGroupIngress' && r.Properties.FromPort === 7880)!;
    delete t.Resources[id];
    expect(() => checkRelay(t, CARRIED)).toThrow('UDP 7880 is not admitted');
  });
  test('tgw: every ENI a static member and source of every group, no relay', () => {
    checkTgw(tgw.toJSON(), CARRIED);
    tgw.hasResourceProperties('AWS::EC2::TransitGatewayMulticastDomain', {
      Options: { Igmpv2Support: 'disable', StaticSourcesSupport: 'enable' },
    });
    tgw.resourceCountIs('AWS::EC2::TransitGatewayMulticastGroupMember', 4 * CARRIED.length);
    expect(() => checkRelay(tgw.toJSON(), CARRIED)).toThrow('a transit gateway in the relay variant');
  });
  test('tgw fails with a member missing', () => {
    const t = clone(tgw.toJSON());
    const [id] = first(t, 'AWS::EC2::TransitGatewayMulticastGroupMember');
    delete t.Resources[id];
    expect(() => checkTgw(t, CARRIED)).toThrow(`node1 is no member of ${GROUPS[0]}`);
  });
  test('tgw fails on the relay variant', () => {
    expect(() => checkTgw(relay.toJSON(), CARRIED)).toThrow('no transit gateway with multicast');
  });
  test('none: no relay, no TGW, no group joined', () => {
    plain.resourceCountIs('AWS::EC2::TransitGateway', 0);
    for (const n of nodes(plain.toJSON(), 'node')) {
      expect(n.ud).not.toContain('wirebench-relay');
      expect(heredoc(n.ud, '/etc/wirebench/serve.env')).toEqual(['WIREBENCH_SERVE_ARGS=--listen 0.0.0.0:7879']);
    }
    expect(() => checkRelay(plain.toJSON(), CARRIED)).toThrow('node1: no relay started');
  });
  test('bad groups are refused', () => {
    expect(() => latency('relay', { groups: ['10.0.0.1:7877'] })).toThrow();
    expect(() => latency('relay', { groups: [REPLY] })).toThrow('the reply group is one of the groups');
  });
});

describe('load shards', () => {
  test('indexes 1..K once each, one start time, reports to the bucket', () => {
    checkShards(loadLab.toJSON(), 4);
    const t = loadLab.toJSON();
    const g = nodes(t, 'generator');
    expect(g[0].ud).toContain('WIREBENCH_LOAD_URL=ws://10.42.0.10:8080/rooms/demo');
    expect(g[0].ud).toContain('WIREBENCH_LOAD_ARGS=--preset collab-ide --link 60.76mbit/10ms --seed 1 -q');
    expect(nodes(t, 'room')).toHaveLength(1);
    loadLab.hasOutput('MergeCommand', { Value: { 'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp('wirebench report --merge run-2026-12-01T09:30:00Z/shard-\\*\\.json')])] } });
  });
  test('fails with a shard index repeated', () => {
    const t = clone(loadLab.toJSON());
    editUserData(t, nodes(t, 'generator')[1].id, 'WIREBENCH_SHARD=2/4', 'WIREBENCH_SHARD=1/4');
    expect(() => checkShards(t, 4)).toThrow('shards 1/4,1/4,3/4,4/4, want 1/4,2/4,3/4,4/4');
  });
  test('fails with two start times', () => {
    const t = clone(loadLab.toJSON());
    editUserData(t, nodes(t, 'generator')[2].id, `WIREBENCH_START_AT=${START}`, 'WIREBENCH_START_AT=2026-12-01T09:30:05Z');
    expect(() => checkShards(t, 4)).toThrow('2 start times');
  });
  test('a URL of the user replaces the room node', () => {
    const t = load({ url: 'wss://app.example.com/rooms/{room}', shards: 2 }).toJSON();
    checkShards(t, 2);
    expect(nodes(t, 'room')).toHaveLength(0);
    expect(userData(t.Resources[nodes(t, 'generator')[0].id])).toContain('WIREBENCH_LOAD_URL=wss://app.example.com/rooms/{room}');
  });
  test('bad settings are refused', () => {
    expect(() => load({ shards: 0 })).toThrow('shards: 0');
    expect(() => load({ url: 'http://x' })).toThrow('url:');
    expect(() => checkStartAt('tomorrow')).toThrow('startAt: tomorrow');
    expect(defaultStartAt(20, new Date('2026-11-28T23:40:30Z'))).toBe('2026-11-29T00:01:00Z');
  });
});

describe('NAT shaping', () => {
  test('link (default): no NAT instance, every generator runs --link', () => {
    checkNatShaping(loadLab.toJSON(), 'link');
    expect(nodes(loadLab.toJSON(), 'nat')).toHaveLength(0);
    expect(() => checkNatShaping(loadLab.toJSON(), 'nat')).toThrow('0 NAT instances, not 1');
  });
  test('nat: the NAT instance shapes every generator in the kernel, the generators run no --link', () => {
    const t = natLab.toJSON();
    checkNatShaping(t, 'nat');
    checkShards(t, 4);
    const [nat] = nodes(t, 'nat');
    expect(nat.addr).toBe('10.42.0.10');
    expect(nodes(t, 'room')[0].addr).toBe('10.42.2.10');
    expect(nodes(t, 'generator').map((g) => g.addr)).toEqual(['10.42.1.11', '10.42.1.12', '10.42.1.13', '10.42.1.14']);
    expect(nat.ud).toContain(
      '/usr/local/bin/wirebench shape tc --dev "$dev" --client 10.42.1.11=60.76mbit/10ms --client 10.42.1.12=60.76mbit/10ms ' +
        '--client 10.42.1.13=60.76mbit/10ms --client 10.42.1.14=60.76mbit/10ms --apply',
    );
    expect(nat.ud).toContain('net.ipv4.ip_forward = 1');
    expect(nodes(t, 'generator')[0].ud).toContain('WIREBENCH_LOAD_ARGS=--preset collab-ide --seed 1 -q');
    natLab.resourceCountIs('AWS::EC2::Route', 2);
    expect(() => checkNatShaping(t, 'link')).toThrow('a NAT instance');
  });
  test('nat fails with the source/dest check on', () => {
    const t = clone(natLab.toJSON());
    const [nat] = nodes(t, 'nat');
    t.Resources[nat.r.Properties.NetworkInterfaces[0].NetworkInterfaceId.Ref].Properties.SourceDestCheck = true;
    expect(() => checkNatShaping(t, 'nat')).toThrow('nat: the source/dest check is on');
  });
  test('nat fails when the NAT instance only prints the script', () => {
    const t = clone(natLab.toJSON());
    editUserData(t, nodes(t, 'nat')[0].id, ' --apply', '');
    expect(() => checkNatShaping(t, 'nat')).toThrow('nat: no shape tc --apply');
  });
  test('nat fails with a generator left unshaped', () => {
    const t = clone(natLab.toJSON());
    editUserData(t, nodes(t, 'nat')[0].id, ' --client 10.42.1.13=60.76mbit/10ms', '');
    expect(() => checkNatShaping(t, 'nat')).toThrow('nat: shapes 10.42.1.11,10.42.1.12,10.42.1.14, want 10.42.1.11,10.42.1.12,10.42.1.13,10.42.1.14');
  });
  test('nat fails with a generator shaping in user space too', () => {
    const t = clone(natLab.toJSON());
    editUserData(t, nodes(t, 'generator')[1].id, /^WIREBENCH_LOAD_ARGS=--preset collab-ide/m, 'WIREBENCH_LOAD_ARGS=--preset collab-ide --link 60.76mbit/10ms');
    expect(() => checkNatShaping(t, 'nat')).toThrow('gen2: load with --link in the nat variant');
  });
  test('nat fails with the route back missing', () => {
    const t = clone(natLab.toJSON());
    delete t.Resources.AppToGenerators;
    expect(() => checkNatShaping(t, 'nat')).toThrow('does not route 10.42.1.0/24 through nat');
  });
  test('link fails with a generator without --link', () => {
    const t = clone(loadLab.toJSON());
    editUserData(t, nodes(t, 'generator')[0].id, /^WIREBENCH_LOAD_ARGS=--preset collab-ide --link 60.76mbit\/10ms/m, 'WIREBENCH_LOAD_ARGS=--preset collab-ide');
    expect(() => checkNatShaping(t, 'link')).toThrow('gen1: load without --link in the link variant');
  });
  test('bad nat settings are refused', () => {
    expect(() => load({ shaping: 'nat', url: 'wss://app.example.com/rooms/demo' })).toThrow('shaping=nat shapes the path to the lab');
    expect(() => load({ shaping: 'nat', link: '' })).toThrow('shaping=nat needs link=RATE/DELAY');
    expect(() => parseShaping('tc')).toThrow('shaping: tc is not link or nat');
  });
});

describe('user data', () => {
  // bash -n parses every node's script (the heredocs closed, the quoting whole).
  test.each(ALL)('%s: every script parses', (_, t) => {
    const insts = Object.values(t.toJSON().Resources as Record<string, Json>).filter((r) => r.Type === 'AWS::EC2::Instance');
    expect(insts.length).toBeGreaterThan(1);
    for (const r of insts) {
      const res = spawnSync('bash', ['-n'], { input: userData(r), encoding: 'utf8' });
      expect(res.stderr).toBe('');
      expect(res.status).toBe(0);
    }
  });
  test('a broken script does not parse', () => {
    const t = clone(plain.toJSON());
    const id = nodes(t, 'node')[0].id;
    editUserData(t, id, "cat > /etc/wirebench/peers <<'WIREBENCH_EOF'", 'cat > "/etc/wirebench/peers');
    const res = spawnSync('bash', ['-n'], { input: userData(t.Resources[id]), encoding: 'utf8' });
    expect(res.status).not.toBe(0);
  });
});
