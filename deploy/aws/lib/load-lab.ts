// LoadLab: the collaborative-IDE load test as a stack. A `wirebench room` node (or the
// user's own URL) and K generators, each running `wirebench load --shard k/K --start-at T`
// with the same scenario, each client's link shaped in user space (--link); every shard's
// report goes to the result bucket, and one command downloads and merges them.
// shaping=nat instead puts a NAT instance between the generators and the room: the two sit
// in subnets of their own that route each other through it, and it shapes each generator's
// address in the kernel (`wirebench shape tc --apply`); the generators then run without --link.
import * as fs from 'fs';
import * as cdk from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';
import {
  LabNetwork, PORTS, labAccess, checkCount, installBase, installUnits,
  labInstance, nodeAddress, subnetAddress, systemdUnit, writeFile,
} from './common';

/** Where the clients' links are shaped: in user space on the generators, or in a NAT instance's kernel. */
export type Shaping = 'link' | 'nat';

export function parseShaping(s: string): Shaping {
  if (s !== 'link' && s !== 'nat') throw new Error(`shaping: ${s} is not link or nat`);
  return s;
}

export interface LoadLabProps extends cdk.StackProps {
  /** Generators (shards), 1..100. */
  readonly shards: number;
  readonly instanceType: string;
  readonly roomInstanceType: string;
  readonly az: string;
  /** The app under test; none: a `wirebench room` node at 10.42.0.10. */
  readonly url?: string;
  /** A scenario file (TOML) for every shard; none: --preset collab-ide. */
  readonly scenarioFile?: string;
  /**
   * The link: each client's in user space (`--link RATE/DELAY`, '' for none) with shaping
   * link; each generator address's in the NAT instance's kernel with shaping nat.
   */
  readonly link: string;
  /** link (default): `--link` on the generators; nat: a NAT instance runs `shape tc --apply`. */
  readonly shaping?: Shaping;
  /** The NAT instance's type (shaping nat). */
  readonly natInstanceType?: string;
  /** Further `wirebench load` flags, the same on every shard. */
  readonly extraArgs: string;
  /** The shards' common start (RFC 3339, UTC). */
  readonly startAt: string;
}

/** A start time `minutes` from now, whole minutes, RFC 3339 UTC. */
export function defaultStartAt(minutes: number, now: Date = new Date()): string {
  const t = new Date(Math.ceil((now.getTime() + minutes * 60_000) / 60_000) * 60_000);
  return t.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function checkStartAt(s: string): string {
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(s) || Number.isNaN(Date.parse(s))) {
    throw new Error(`startAt: ${s} is not an RFC 3339 UTC time (2026-11-29T01:00:00Z)`);
  }
  return s;
}

export class LoadLab extends cdk.Stack {
  readonly generators: ec2.Instance[] = [];
  room?: ec2.Instance;
  natInstance?: { instance: ec2.Instance; eni: ec2.CfnNetworkInterface };

  constructor(scope: Construct, id: string, props: LoadLabProps) {
    super(scope, id, props);
    const k = checkCount('shards', props.shards, 1, 100);
    const startAt = checkStartAt(props.startAt);
    if (props.url !== undefined && !/^wss?:\/\/\S+$/.test(props.url)) {
      throw new Error(`url: ${props.url} is not a ws:// or wss:// URL`);
    }
    if (/[\n'"\\`$]/.test(props.extraArgs + props.link)) {
      throw new Error('loadArgs and link: no quotes, backslashes, $ or new lines');
    }
    const shaping = props.shaping ?? 'link';
    if (shaping === 'nat') {
      if (props.url !== undefined) throw new Error('shaping=nat shapes the path to the lab\'s room node: leave url unset, or use shaping=link');
      if (!/^\S+\/\S+$/.test(props.link)) throw new Error(`shaping=nat needs link=RATE/DELAY, not '${props.link}'`);
    }
    const scenario = props.scenarioFile === undefined ? undefined : fs.readFileSync(props.scenarioFile, 'utf8');

    // nat: the generators (10.42.1.0/24) and the room (10.42.2.0/24) in subnets of their own,
    // the NAT instance and the endpoints in the lab subnet (10.42.0.0/24).
    const nat = shaping === 'nat';
    const net = new LabNetwork(this, 'Net', { az: props.az, extraSubnets: nat ? ['generators', 'app'] : [] });
    const genSubnet = nat ? net.subnetNamed('generators') : net.subnet;
    const appSubnet = nat ? net.subnetNamed('app') : net.subnet;
    const genAddress = (i: number): string => (nat ? subnetAddress(1, i) : nodeAddress(i));
    net.allowFromNodes(ec2.Port.tcp(PORTS.room), 'room: WebSocket from the generators');
    const { role, bucket, token, asset } = labAccess(this);

    const roomAddr = nat ? subnetAddress(2, 0) : nodeAddress(0);
    if (props.url === undefined) {
      const ud = ec2.UserData.forLinux();
      installBase(ud, asset, token);
      installUnits(ud, [{ unit: 'wirebench-room.service', envFile: '/etc/wirebench/room.env', env: { WIREBENCH_ROOM_ARGS: `--listen 0.0.0.0:${PORTS.room}` } }]);
      this.room = labInstance(this, 'Room', {
        net, address: roomAddr, instanceType: new ec2.InstanceType(props.roomInstanceType), role,
        userData: ud, name: 'room', labTag: this.stackName, roleTag: 'room', subnet: appSubnet,
      }).instance;
    }
    const url = props.url ?? `ws://${roomAddr}:${PORTS.room}/rooms/demo`;
    const args = [
      scenario === undefined ? '--preset collab-ide' : '--scenario /etc/wirebench/scenario.toml',
      nat || props.link === '' ? '' : `--link ${props.link}`,
      props.extraArgs,
      '-q',
    ].filter((a) => a !== '').join(' ');
    const genType = new ec2.InstanceType(props.instanceType);
    for (let i = 1; i <= k; i++) {
      const ud = ec2.UserData.forLinux();
      installBase(ud, asset, token);
      if (scenario !== undefined) {
        ud.addCommands(...writeFile('/etc/wirebench/scenario.toml', '0644', scenario));
      }
      ud.addCommands(...writeFile('/etc/systemd/system/wirebench-load.service', '0644', systemdUnit('wirebench-load.service')));
      ud.addCommands(...writeFile('/etc/wirebench/load.env', '0640', [
        `WIREBENCH_LOAD_URL=${url}`,
        `WIREBENCH_LOAD_ARGS=${args}`,
        `WIREBENCH_SHARD=${i}/${k}`,
        `WIREBENCH_START_AT=${startAt}`,
        `WIREBENCH_RESULTS=s3://${bucket.bucketName}/runs`,
      ].join('\n')));
      // Started, not enabled (a reboot must not rerun a past start), and not waited for.
      ud.addCommands('systemctl daemon-reload', 'systemctl start --no-block wirebench-load.service');
      const { instance } = labInstance(this, `Generator${i}`, {
        net, address: genAddress(i), instanceType: genType, role, userData: ud,
        name: `gen${i}`, labTag: this.stackName, roleTag: 'generator', subnet: genSubnet,
      });
      this.generators.push(instance);
    }

    if (nat) {
      // The NAT instance forwards between the two subnets (no source/dest check) and gives
      // each generator's address its own HTB class (rate, and netem delay where the kernel
      // has it) on its one interface's egress: both directions leave by it.
      const natAddr = nodeAddress(0);
      const clients = Array.from({ length: k }, (_, j) => `--client ${genAddress(j + 1)}=${props.link}`).join(' ');
      const ud = ec2.UserData.forLinux();
      installBase(ud, asset, token);
      ud.addCommands(
        ...writeFile('/etc/sysctl.d/90-wirebench-nat.conf', '0644', 'net.ipv4.ip_forward = 1\nnet.ipv4.conf.all.send_redirects = 0\nnet.ipv4.conf.default.send_redirects = 0'),
        'sysctl --system >/dev/null',
        // tc is in iproute-tc on AL2023 (dnf reaches its repositories through the S3 endpoint).
        'command -v tc >/dev/null || dnf install -y -q iproute-tc',
        `dev=$(ip -o route get ${roomAddr} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')`,
        'sysctl -qw "net.ipv4.conf.$dev.send_redirects=0"',
        `/usr/local/bin/wirebench shape tc --dev "$dev" ${clients} --apply`,
      );
      this.natInstance = labInstance(this, 'Nat', {
        net, address: natAddr, instanceType: new ec2.InstanceType(props.natInstanceType ?? 'c6in.large'), role,
        userData: ud, name: 'nat', labTag: this.stackName, roleTag: 'nat', sourceDestCheck: false,
      });
      // Each side reaches the other through the NAT instance (routes more specific than the
      // VPC's local route, each the other subnet's whole range).
      for (const [id, from, to] of [['GeneratorsToApp', genSubnet, appSubnet], ['AppToGenerators', appSubnet, genSubnet]] as const) {
        new ec2.CfnRoute(this, id, {
          routeTableId: from.routeTable.routeTableId,
          destinationCidrBlock: to.ipv4CidrBlock,
          networkInterfaceId: this.natInstance.eni.ref,
        });
      }
    }

    const ids = cdk.Fn.join(' ', this.generators.map((g) => g.instanceId));
    new cdk.CfnOutput(this, 'GeneratorIds', { value: ids });
    new cdk.CfnOutput(this, 'Url', { value: url, description: 'the app under test' });
    new cdk.CfnOutput(this, 'StartAt', { value: startAt, description: 'the shards start their ramp together at this time' });
    new cdk.CfnOutput(this, 'ResultBucket', { value: bucket.bucketName });
    new cdk.CfnOutput(this, 'MergeCommand', {
      description: 'download every shard of the run and merge them (exit 3: a threshold failed on the whole run)',
      value:
        `mkdir -p run-${startAt} && aws s3 cp --recursive s3://${bucket.bucketName}/runs/${startAt}/ run-${startAt}/ && ` +
        `wirebench report --merge run-${startAt}/shard-*.json --json run-${startAt}/all.json --html run-${startAt}/all.html`,
    });
    new cdk.CfnOutput(this, 'RerunCommand', {
      description: 'set AT (e.g. AT=$(date -u -d +3min +%Y-%m-%dT%H:%M:00Z)) and run every shard again at AT',
      value:
        `aws ssm send-command --region ${this.region} --instance-ids ${ids} --document-name AWS-RunShellScript --comment 'wirebench load rerun' ` +
        `--parameters "{\\"commands\\":[\\"sed -i 's/^WIREBENCH_START_AT=.*/WIREBENCH_START_AT=$AT/' /etc/wirebench/load.env\\",\\"systemctl start --no-block wirebench-load\\"]}" ` +
        '--query Command.CommandId --output text',
    });
  }
}
