// The properties every synthesized lab must have, as functions over a template's JSON that
// throw on the first violation, so that a test can run each one on a good template (passes)
// and on a deliberately broken copy (throws).
/* eslint-disable @typescript-eslint/no-explicit-any */
export type Json = any;
type Resources = Record<string, { Type: string; Properties?: Json }>;

export function clone(t: Json): Json {
  return JSON.parse(JSON.stringify(t));
}

function resources(t: Json, type: string): [string, Json][] {
  return Object.entries(t.Resources as Resources).filter(([, r]) => r.Type === type);
}

function fail(msg: string): never {
  throw new Error(msg);
}

/** The user data's text, with every token (bucket, ARN) as <TOKEN>. */
export function userData(instance: Json): string {
  const ud = instance.Properties?.UserData?.['Fn::Base64'];
  if (typeof ud === 'string') return ud;
  if (ud?.['Fn::Join']) return (ud['Fn::Join'][1] as Json[]).map((x) => (typeof x === 'string' ? x : '<TOKEN>')).join('');
  return fail('an instance without user data');
}

function tag(r: Json, key: string): string | undefined {
  return (r.Properties?.Tags as { Key: string; Value: string }[] | undefined)?.find((x) => x.Key === key)?.Value;
}

/** The lab's instances by role, with their fixed address (from their ENI) and user data. */
export function nodes(t: Json, role: string): { id: string; name: string; addr: string; ud: string; r: Json }[] {
  return resources(t, 'AWS::EC2::Instance')
    .filter(([, r]) => tag(r, 'wirebench:role') === role)
    .map(([id, r]) => {
      const nics = r.Properties.NetworkInterfaces as Json[] | undefined;
      const eniId = nics?.[0]?.NetworkInterfaceId?.Ref ?? fail(`${id}: no ENI of the lab`);
      const addr = t.Resources[eniId]?.Properties?.PrivateIpAddress ?? fail(`${id}: its ENI has no fixed address`);
      return { id, name: tag(r, 'wirebench:node') ?? fail(`${id}: no wirebench:node tag`), addr, ud: userData(r), r };
    });
}

/** The lines of a file user data writes with a heredoc, comments left out. */
export function heredoc(ud: string, path: string): string[] | undefined {
  const m = new RegExp(`cat > ${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} <<'WIREBENCH_EOF'\\n([\\s\\S]*?)\\nWIREBENCH_EOF`).exec(ud);
  return m?.[1].split('\n').filter((l) => l !== '' && !l.startsWith('#'));
}

/** One cluster placement group, and every node of the lab in it. */
export function checkPlacement(t: Json): void {
  const pgs = resources(t, 'AWS::EC2::PlacementGroup');
  if (pgs.length !== 1) fail(`${pgs.length} placement groups, not 1`);
  const [pgId, pg] = pgs[0];
  if (pg.Properties?.Strategy !== 'cluster') fail(`placement group strategy ${pg.Properties?.Strategy}, not cluster`);
  const insts = resources(t, 'AWS::EC2::Instance');
  if (insts.length === 0) fail('no instances');
  for (const [id, r] of insts) {
    const ref = r.Properties?.PlacementGroupName;
    const ok = ref?.Ref === pgId || (ref?.['Fn::GetAtt']?.[0] === pgId && ref['Fn::GetAtt'][1] === 'GroupName');
    if (!ok) fail(`${id} is not in the placement group ${pgId}`);
  }
}

/** No ingress from anywhere: every rule names a security group, none an address range. */
export function checkIngress(t: Json): void {
  const rules: [string, Json][] = [];
  for (const [id, sg] of resources(t, 'AWS::EC2::SecurityGroup')) {
    for (const r of (sg.Properties?.SecurityGroupIngress as Json[] | undefined) ?? []) rules.push([id, r]);
  }
  for (const [id, r] of resources(t, 'AWS::EC2::SecurityGroupIngress')) rules.push([id, r.Properties]);
  for (const [id, r] of rules) {
    if (r.CidrIp === '0.0.0.0/0' || r.CidrIpv6 === '::/0') fail(`${id}: ingress from anywhere (${r.CidrIp ?? r.CidrIpv6})`);
    if (r.CidrIp !== undefined || r.CidrIpv6 !== undefined || r.SourcePrefixListId !== undefined) {
      fail(`${id}: ingress from an address range (${r.CidrIp ?? r.CidrIpv6 ?? r.SourcePrefixListId}), not a lab group`);
    }
    if (r.SourceSecurityGroupId === undefined) fail(`${id}: ingress without a source group`);
  }
  for (const [id, i] of resources(t, 'AWS::EC2::Instance')) {
    if (i.Properties?.NetworkInterfaces?.some((n: Json) => n.AssociatePublicIpAddress === true)) fail(`${id}: a public address`);
    if (i.Properties?.KeyName !== undefined) fail(`${id}: an SSH key`);
  }
}

/** Each node's peer list names every other node, and not itself. */
export function checkPeers(t: Json): void {
  const all = nodes(t, 'node');
  if (all.length < 2) fail(`${all.length} nodes`);
  for (const n of all) {
    const lines = heredoc(n.ud, '/etc/wirebench/peers') ?? fail(`${n.name}: no peer list`);
    const listed = lines.map((l) => l.split(/\s+/)[0].replace(/:\d+$/, '')).sort();
    const want = all.filter((o) => o !== n).map((o) => o.addr).sort();
    if (JSON.stringify(listed) !== JSON.stringify(want)) fail(`${n.name}: peers ${listed.join(',')}, want ${want.join(',')}`);
    if (!n.ud.includes(`WIREBENCH_MESH_ADVERTISE=${n.addr}`)) fail(`${n.name}: does not advertise ${n.addr}`);
  }
}

const SSM_CORE = ':iam::aws:policy/AmazonSSMManagedInstanceCore';
const ASSET_BUCKET = 'cdk-hnb659fds-assets-';

/**
 * The node role: SSM core as its only managed policy; its statements only read the binary
 * asset, read the fleet token, and read and write the result bucket. No other role.
 */
export function checkIam(t: Json): void {
  const roles = resources(t, 'AWS::IAM::Role');
  if (roles.length !== 1) fail(`${roles.length} roles, not 1 (the nodes')`);
  const [roleId, role] = roles[0];
  const managed = JSON.stringify(role.Properties?.ManagedPolicyArns ?? []);
  const arns = (role.Properties?.ManagedPolicyArns as Json[] | undefined) ?? [];
  if (arns.length !== 1 || !managed.includes(SSM_CORE)) fail(`${roleId}: managed policies ${managed}, not SSM core alone`);
  const bucket = resources(t, 'AWS::S3::Bucket').map(([id]) => id);
  const secret = resources(t, 'AWS::SecretsManager::Secret').map(([id]) => id);
  if (bucket.length !== 1 || secret.length !== 1) fail('not one result bucket and one token');
  for (const [pid, p] of resources(t, 'AWS::IAM::Policy')) {
    if (JSON.stringify(p.Properties.Roles) !== JSON.stringify([{ Ref: roleId }])) fail(`${pid}: attached to ${JSON.stringify(p.Properties.Roles)}`);
    for (const s of p.Properties.PolicyDocument.Statement as Json[]) {
      if (s.Effect !== 'Allow') continue;
      const actions: string[] = [].concat(s.Action);
      const res: Json[] = [].concat(s.Resource ?? fail(`${pid}: a statement without a resource`));
      for (const r of res) {
        const txt = JSON.stringify(r);
        if (r === '*' || txt === '"*"') fail(`${pid}: ${actions.join(',')} on every resource`);
        if (txt.includes(bucket[0])) {
          if (!actions.every((a) => a.startsWith('s3:'))) fail(`${pid}: ${actions.join(',')} on the result bucket`);
        } else if (txt.includes(secret[0])) {
          if (!actions.every((a) => a === 'secretsmanager:GetSecretValue' || a === 'secretsmanager:DescribeSecret')) fail(`${pid}: ${actions.join(',')} on the token`);
        } else if (txt.includes(ASSET_BUCKET)) {
          if (!actions.every((a) => /^s3:(Get|List)/.test(a))) fail(`${pid}: ${actions.join(',')} on the asset bucket`);
        } else {
          fail(`${pid}: ${actions.join(',')} on ${txt}, not the lab's bucket, token or binary`);
        }
      }
    }
  }
}

/** multicast relay: every node runs the relay for every group, its peers the other nodes. */
export function checkRelay(t: Json, groups: string[]): void {
  if (resources(t, 'AWS::EC2::TransitGateway').length !== 0) fail('a transit gateway in the relay variant');
  const all = nodes(t, 'node');
  for (const n of all) {
    if (!/systemctl enable --now .*wirebench-relay\.service/.test(n.ud)) fail(`${n.name}: no relay started`);
    const env = heredoc(n.ud, '/etc/wirebench/relay.env') ?? fail(`${n.name}: no relay.env`);
    for (const g of groups) if (!env.join(' ').includes(`--group ${g}`)) fail(`${n.name}: the relay does not carry ${g}`);
    const peers = (heredoc(n.ud, '/etc/wirebench/relay-peers') ?? []).map((l) => l.replace(/:\d+$/, '')).sort();
    const want = all.filter((o) => o !== n).map((o) => o.addr).sort();
    if (JSON.stringify(peers) !== JSON.stringify(want)) fail(`${n.name}: relay peers ${peers.join(',')}, want ${want.join(',')}`);
  }
  checkGroupPorts(t, [...groups.map((g) => Number(g.split(':')[1])), 7880]);
}

/** multicast tgw: a multicast domain with every node's ENI a member and a source of every group. */
export function checkTgw(t: Json, groups: string[]): void {
  const tgws = resources(t, 'AWS::EC2::TransitGateway');
  if (tgws.length !== 1 || tgws[0][1].Properties?.MulticastSupport !== 'enable') fail('no transit gateway with multicast');
  const domains = resources(t, 'AWS::EC2::TransitGatewayMulticastDomain');
  if (domains.length !== 1) fail(`${domains.length} multicast domains`);
  if (resources(t, 'AWS::EC2::TransitGatewayMulticastDomainAssociation').length !== 1) fail('the subnet is not associated');
  const all = nodes(t, 'node');
  for (const type of ['AWS::EC2::TransitGatewayMulticastGroupMember', 'AWS::EC2::TransitGatewayMulticastGroupSource']) {
    const regs = resources(t, type).map(([, r]) => `${r.Properties.GroupIpAddress} ${r.Properties.NetworkInterfaceId.Ref}`);
    for (const g of groups) {
      for (const n of all) {
        const eni = n.r.Properties.NetworkInterfaces[0].NetworkInterfaceId.Ref;
        if (!regs.includes(`${g.split(':')[0]} ${eni}`)) fail(`${n.name} is no ${type.endsWith('Member') ? 'member' : 'source'} of ${g}`);
      }
    }
  }
  for (const n of all) if (n.ud.includes('wirebench-relay')) fail(`${n.name}: a relay in the tgw variant`);
  checkGroupPorts(t, groups.map((g) => Number(g.split(':')[1])));
}

/** The nodes' group admits UDP on these ports from itself. */
function checkGroupPorts(t: Json, ports: number[]): void {
  const rules = resources(t, 'AWS::EC2::SecurityGroupIngress').map(([, r]) => r.Properties);
  for (const p of ports) {
    const ok = rules.some((r) => r.IpProtocol === 'udp' && r.FromPort === p && r.ToPort === p && JSON.stringify(r.SourceSecurityGroupId) === JSON.stringify({ 'Fn::GetAtt': [r.GroupId['Fn::GetAtt'][0], 'GroupId'] }));
    if (!ok) fail(`UDP ${p} is not admitted from the nodes`);
  }
}

/** The load shards: indexes 1..K once each, one start time, every shard's report to the bucket. */
export function checkShards(t: Json, k: number): void {
  const gens = nodes(t, 'generator');
  if (gens.length !== k) fail(`${gens.length} generators, not ${k}`);
  const shards: string[] = [];
  const starts = new Set<string>();
  for (const g of gens) {
    const env = heredoc(g.ud, '/etc/wirebench/load.env') ?? fail(`${g.name}: no load.env`);
    const get = (key: string): string => env.find((l) => l.startsWith(`${key}=`))?.slice(key.length + 1) ?? fail(`${g.name}: no ${key}`);
    shards.push(get('WIREBENCH_SHARD'));
    starts.add(get('WIREBENCH_START_AT'));
    if (!get('WIREBENCH_RESULTS').startsWith('s3://<TOKEN>/')) fail(`${g.name}: results not to the bucket`);
    if (!g.ud.includes('wirebench-load.service')) fail(`${g.name}: no load unit`);
  }
  const want = Array.from({ length: k }, (_, i) => `${i + 1}/${k}`);
  if (JSON.stringify([...shards].sort()) !== JSON.stringify([...want].sort())) fail(`shards ${shards.join(',')}, want ${want.join(',')}`);
  if (starts.size !== 1) fail(`${starts.size} start times: ${[...starts].join(', ')}`);
}

/** A generator's `wirebench load` flags (WIREBENCH_LOAD_ARGS in its load.env). */
function loadArgs(g: { name: string; ud: string }): string {
  const env = heredoc(g.ud, '/etc/wirebench/load.env') ?? fail(`${g.name}: no load.env`);
  return env.find((l) => l.startsWith('WIREBENCH_LOAD_ARGS='))?.slice('WIREBENCH_LOAD_ARGS='.length) ?? fail(`${g.name}: no WIREBENCH_LOAD_ARGS`);
}

/**
 * Where the links are shaped. link: no NAT instance, no route through an instance, every
 * generator runs load with --link. nat: one NAT instance whose ENI has the source/dest check
 * off and whose user data runs `shape tc --apply` with every generator's address as a
 * --client; the generators' subnet routes the room's subnet through that ENI (and back);
 * no generator runs --link.
 */
export function checkNatShaping(t: Json, shaping: 'link' | 'nat'): void {
  const nats = nodes(t, 'nat');
  const gens = nodes(t, 'generator');
  if (gens.length === 0) fail('no generators');
  const routes = resources(t, 'AWS::EC2::Route').filter(([, r]) => r.Properties?.NetworkInterfaceId !== undefined || r.Properties?.InstanceId !== undefined);
  if (shaping === 'link') {
    if (nats.length !== 0) fail(`a NAT instance (${nats[0].id}) in the link variant`);
    if (routes.length !== 0) fail(`a route through an instance (${routes[0][0]}) in the link variant`);
    for (const g of gens) if (!/(^| )--link \S+/.test(loadArgs(g))) fail(`${g.name}: load without --link in the link variant`);
    return;
  }
  if (nats.length !== 1) fail(`${nats.length} NAT instances, not 1`);
  const nat = nats[0];
  const eniId = nat.r.Properties.NetworkInterfaces[0].NetworkInterfaceId.Ref;
  if (t.Resources[eniId].Properties.SourceDestCheck !== false) fail(`${nat.name}: the source/dest check is on`);
  const shape = /wirebench shape tc --dev \S+((?: --client \S+)+) --apply\b/.exec(nat.ud) ?? fail(`${nat.name}: no shape tc --apply in its user data`);
  const shaped = shape[1].trim().split(/\s+/).filter((w) => w !== '--client').map((c) => c.split('=')[0]).sort();
  const want = gens.map((g) => g.addr).sort();
  if (JSON.stringify(shaped) !== JSON.stringify(want)) fail(`${nat.name}: shapes ${shaped.join(',')}, want ${want.join(',')}`);
  for (const g of gens) if (/(^| )--link(-down)? /.test(loadArgs(g))) fail(`${g.name}: load with --link in the nat variant`);
  // Each side's subnet routes the other's whole range through the NAT instance's ENI.
  const subnetOf = (n: { addr: string; r: Json }): string => t.Resources[n.r.Properties.NetworkInterfaces[0].NetworkInterfaceId.Ref].Properties.SubnetId.Ref;
  const tableOf = (subnet: string): string =>
    resources(t, 'AWS::EC2::SubnetRouteTableAssociation').find(([, a]) => a.Properties.SubnetId.Ref === subnet)?.[1].Properties.RouteTableId.Ref ?? fail(`${subnet}: no route table`);
  const rooms = nodes(t, 'room');
  if (rooms.length !== 1) fail(`${rooms.length} room nodes in the nat variant`);
  const pairs: [string, string][] = [[subnetOf(gens[0]), subnetOf(rooms[0])], [subnetOf(rooms[0]), subnetOf(gens[0])]];
  for (const g of gens) if (subnetOf(g) !== pairs[0][0]) fail(`${g.name} is not in the generators' subnet`);
  for (const [from, to] of pairs) {
    if (from === to) fail('the generators and the room share a subnet: nothing routes them through the NAT instance');
    const cidr = t.Resources[to].Properties.CidrBlock;
    const ok = routes.some(([, r]) => r.Properties.RouteTableId.Ref === tableOf(from) && r.Properties.DestinationCidrBlock === cidr && r.Properties.NetworkInterfaceId?.Ref === eniId);
    if (!ok) fail(`${from} does not route ${cidr} through ${nat.name}`);
  }
  if (subnetOf(nat) === pairs[0][0] || subnetOf(nat) === pairs[1][0]) fail(`${nat.name} sits in a subnet it routes`);
}
