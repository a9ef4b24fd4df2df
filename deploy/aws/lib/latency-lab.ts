// LatencyLab: N nodes in a cluster placement group at fixed addresses, each running the
// mesh agent (peers known at synth time) and serve, optionally multicast by relay or by a
// Transit Gateway multicast domain. Reached through SSM only.
import * as cdk from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';
import {
  LabNetwork, PORTS, labAccess, MAX_NODES, checkCount, installBase,
  installUnits, UnitInstall, labInstance, nodeAddress, sendCommand,
} from './common';

export type Multicast = 'none' | 'relay' | 'tgw';

export interface LatencyLabProps extends cdk.StackProps {
  /** Number of nodes, 2..100 (user data holds the peer list). */
  readonly nodes: number;
  readonly instanceType: string;
  readonly az: string;
  readonly multicast: Multicast;
  /** Multicast groups as GROUP:PORT (serve joins them; relay carries them; TGW registers them). */
  readonly groups: string[];
  /**
   * The group serve answers group probes on (Aeron's pong channel): through a relay a reply
   * by unicast would reach the relay, not the pinger (docs/modes/relay.md).
   */
  readonly replyGroup: string;
}

export function parseGroups(s: string): string[] {
  const groups = s.split(',').map((g) => g.trim()).filter((g) => g !== '');
  for (const g of groups) {
    const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+):(\d+)$/.exec(g);
    const octets = m ? m.slice(1, 5).map(Number) : [];
    const port = m ? Number(m[5]) : 0;
    if (!m || octets.some((o) => o > 255) || octets[0] < 224 || octets[0] > 239 || port < 1 || port > 65535) {
      throw new Error(`groups: ${g} is not an IPv4 multicast GROUP:PORT`);
    }
    if ([PORTS.agent, PORTS.http, PORTS.serve, PORTS.relay].includes(port)) {
      throw new Error(`groups: ${g}: port ${port} is one of the lab's own ports`);
    }
  }
  if (groups.length > 64) {
    throw new Error('groups: at most 64');
  }
  return groups;
}

export function parseMulticast(s: string): Multicast {
  if (s === 'none' || s === 'relay' || s === 'tgw') {
    return s;
  }
  throw new Error(`multicast: ${s} is not none, relay or tgw`);
}

export class LatencyLab extends cdk.Stack {
  readonly instances: ec2.Instance[] = [];

  constructor(scope: Construct, id: string, props: LatencyLabProps) {
    super(scope, id, props);
    const n = checkCount('nodes', props.nodes, 2, MAX_NODES);
    parseGroups(props.groups.join(','));
    if (props.multicast !== 'none' && props.groups.length === 0) {
      throw new Error(`multicast ${props.multicast} needs at least one group`);
    }
    // Every group the lab carries: the joined ones and the reply group.
    const carried = props.multicast === 'none' ? [] : [...props.groups, ...parseGroups(props.replyGroup)];
    if (new Set(carried).size !== carried.length) {
      throw new Error('groups: the reply group is one of the groups');
    }
    const instanceType = new ec2.InstanceType(props.instanceType);
    const net = new LabNetwork(this, 'Net', { az: props.az });
    net.allowFromNodes(ec2.Port.tcp(PORTS.agent), 'mesh probes (TCP)');
    net.allowFromNodes(ec2.Port.udp(PORTS.agent), 'mesh probes (UDP)');
    net.allowFromNodes(ec2.Port.tcp(PORTS.http), 'mesh HTTP API (mesh status)');
    net.allowFromNodes(ec2.Port.tcp(PORTS.serve), 'serve: ping and stream (TCP)');
    net.allowFromNodes(ec2.Port.udp(PORTS.serve), 'serve: ping and stream (UDP)');
    if (props.multicast === 'relay') {
      net.allowFromNodes(ec2.Port.udp(PORTS.relay), 'relay datagrams');
    }
    if (props.multicast !== 'none') {
      for (const port of new Set(carried.map((g) => Number(g.split(':')[1])))) {
        net.allowFromNodes(ec2.Port.udp(port), `multicast group port ${port}`);
      }
    }

    const pg = new ec2.PlacementGroup(this, 'PlacementGroup', { strategy: ec2.PlacementGroupStrategy.CLUSTER });
    const { role, bucket, token, asset } = labAccess(this);

    const addrs = Array.from({ length: n }, (_, k) => nodeAddress(k + 1));
    const enis: ec2.CfnNetworkInterface[] = [];
    for (let i = 1; i <= n; i++) {
      const me = addrs[i - 1];
      const ud = ec2.UserData.forLinux();
      installBase(ud, asset, token);
      const peers = addrs
        .map((a, k) => ({ a, k: k + 1 }))
        .filter((p) => p.k !== i)
        .map((p) => `${p.a}:${PORTS.agent} name=node${p.k} zone=${props.az}`);
      ud.addCommands(
        `cat > /etc/wirebench/peers <<'WIREBENCH_EOF'\n# the other nodes of the lab (written at synth time)\n${peers.join('\n')}\nWIREBENCH_EOF`,
      );
      const joins = props.multicast === 'none' ? [] : [...props.groups.flatMap((g) => ['--join', g]), '--reply-group', props.replyGroup];
      const units: UnitInstall[] = [
        {
          unit: 'wirebench-mesh.service',
          envFile: '/etc/wirebench/mesh.env',
          env: {
            WIREBENCH_MESH_PEERS: 'file:/etc/wirebench/peers',
            WIREBENCH_MESH_NAME: `node${i}`,
            WIREBENCH_MESH_ZONE: props.az,
            WIREBENCH_MESH_ADVERTISE: me,
          },
        },
        {
          unit: 'wirebench-serve.service',
          envFile: '/etc/wirebench/serve.env',
          mode: '0600',
          env: {
            WIREBENCH_SERVE_ARGS: [`--listen 0.0.0.0:${PORTS.serve}`, ...(joins.length ? [joins.join(' '), `--interface ${me}`] : [])].join(' '),
          },
        },
      ];
      if (props.multicast === 'relay') {
        ud.addCommands(
          `cat > /etc/wirebench/relay-peers <<'WIREBENCH_EOF'\n# the other nodes' relays (written at synth time)\n${addrs
            .filter((_, k) => k + 1 !== i)
            .map((a) => `${a}:${PORTS.relay}`)
            .join('\n')}\nWIREBENCH_EOF`,
        );
        units.push({
          unit: 'wirebench-relay.service',
          envFile: '/etc/wirebench/relay.env',
          mode: '0640',
          env: {
            WIREBENCH_RELAY_ARGS: [`--interface ${me}`, `--listen 0.0.0.0:${PORTS.relay}`, '--peers file:/etc/wirebench/relay-peers', ...carried.map((g) => `--group ${g}`)].join(' '),
          },
        });
      }
      // serve's stream token goes from the token file into its root-only environment file
      installUnits(ud, units, ['printf "WIREBENCH_TOKEN=%s\\n" "$(cat /etc/wirebench/token)" >> /etc/wirebench/serve.env']);

      const { instance: inst, eni } = labInstance(this, `Node${i}`, {
        net, address: me, instanceType, role, userData: ud, name: `node${i}`,
        labTag: this.stackName, roleTag: 'node', placementGroup: pg,
      });
      enis.push(eni);
      this.instances.push(inst);
    }

    if (props.multicast === 'tgw') {
      this.tgwMulticast(net, enis, carried);
    }
    this.outputs(addrs, bucket.bucketName, props);
  }

  /** AWS's native multicast: a TGW domain with every node's ENI a member and a source. */
  private tgwMulticast(net: LabNetwork, enis: ec2.CfnNetworkInterface[], groups: string[]): void {
    const tgw = new ec2.CfnTransitGateway(this, 'Tgw', {
      description: 'wirebench lab: multicast domain',
      multicastSupport: 'enable',
      autoAcceptSharedAttachments: 'disable',
      defaultRouteTableAssociation: 'enable',
      defaultRouteTablePropagation: 'enable',
    });
    const attach = new ec2.CfnTransitGatewayAttachment(this, 'TgwAttachment', {
      transitGatewayId: tgw.ref,
      vpcId: net.vpc.vpcId,
      subnetIds: [net.subnet.subnetId],
    });
    const domain = new ec2.CfnTransitGatewayMulticastDomain(this, 'TgwMulticastDomain', {
      transitGatewayId: tgw.ref,
      // Static members and sources (below): no IGMP, so no IGMP query to admit.
      options: { Igmpv2Support: 'disable', StaticSourcesSupport: 'enable', AutoAcceptSharedAssociations: 'disable' },
    });
    const assoc = new ec2.CfnTransitGatewayMulticastDomainAssociation(this, 'TgwMulticastAssociation', {
      transitGatewayMulticastDomainId: domain.attrTransitGatewayMulticastDomainId,
      transitGatewayAttachmentId: attach.attrId,
      subnetId: net.subnet.subnetId,
    });
    groups.forEach((g, gi) => {
      const ip = g.split(':')[0];
      enis.forEach((eni, k) => {
        const member = new ec2.CfnTransitGatewayMulticastGroupMember(this, `TgwMember${gi + 1}Node${k + 1}`, {
          groupIpAddress: ip,
          networkInterfaceId: eni.ref,
          transitGatewayMulticastDomainId: domain.attrTransitGatewayMulticastDomainId,
        });
        const source = new ec2.CfnTransitGatewayMulticastGroupSource(this, `TgwSource${gi + 1}Node${k + 1}`, {
          groupIpAddress: ip,
          networkInterfaceId: eni.ref,
          transitGatewayMulticastDomainId: domain.attrTransitGatewayMulticastDomainId,
        });
        member.addDependency(assoc);
        source.addDependency(assoc);
      });
    });
  }

  private outputs(addrs: string[], bucket: string, props: LatencyLabProps): void {
    const ids = this.instances.map((x) => x.instanceId);
    new cdk.CfnOutput(this, 'InstanceIds', { value: cdk.Fn.join(' ', ids), description: 'node1..nodeN' });
    new cdk.CfnOutput(this, 'Addresses', { value: addrs.join(' '), description: 'node1..nodeN private addresses' });
    new cdk.CfnOutput(this, 'ResultBucket', { value: bucket });
    const send = (id: string, what: string, cmd: string): string => sendCommand(this, id, what, cmd);
    const tok = 'WIREBENCH_TOKEN=$(cat /etc/wirebench/token)';
    const stamp = '$(date -u +%Y%m%dT%H%M%SZ)';
    new cdk.CfnOutput(this, 'PingCommand', {
      description: 'node1 pings node2 for 10 s; read the output with aws ssm get-command-invocation --command-id ID --instance-id ID',
      value: send(ids[0], 'wirebench ping', `wirebench ping ${addrs[1]}:${PORTS.serve} --duration 10s`),
    });
    new cdk.CfnOutput(this, 'StreamCommand', {
      description: 'node1 streams to node2 (UDP, 10 s) with the fleet token',
      value: send(ids[0], 'wirebench stream', `${tok} wirebench stream ${addrs[1]}:${PORTS.serve} --duration 10s`),
    });
    const agents = addrs.map((a) => `http://${a}:${PORTS.http}`).join(' ');
    new cdk.CfnOutput(this, 'MeshStatusCommand', {
      description: 'the N x N matrix from node1, saved to the result bucket',
      value: send(
        ids[0],
        'wirebench mesh status',
        `R=mesh-${stamp}.json; wirebench mesh status ${agents} --token-file /etc/wirebench/token --json /tmp/$R; s=$?; aws s3 cp /tmp/$R s3://${bucket}/$R; exit $s`,
      ),
    });
    if (props.multicast !== 'none') {
      new cdk.CfnOutput(this, 'MulticastPingCommand', {
        description: `node1 pings ${props.groups[0]}, replies on ${props.replyGroup} (${props.multicast}): one histogram per answering node`,
        value: send(ids[0], 'wirebench ping group', `wirebench ping ${props.groups[0]} --reply-group ${props.replyGroup} --interface ${addrs[0]} --duration 10s`),
      });
    }
  }
}

