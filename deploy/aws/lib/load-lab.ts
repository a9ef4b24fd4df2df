// LoadLab: the collaborative-IDE load test as a stack. A `wirebench room` node (or the
// user's own URL) and K generators, each running `wirebench load --shard k/K --start-at T`
// with the same scenario, each client's link shaped in user space (--link); every shard's
// report goes to the result bucket, and one command downloads and merges them.
import * as fs from 'fs';
import * as cdk from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Construct } from 'constructs';
import {
  LabNetwork, PORTS, binaryAsset, checkCount, fleetToken, installBase, installUnits,
  labInstance, nodeAddress, nodeRole, resultBucket, systemdUnit, writeFile,
} from './common';

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
  /** Per-client link in user space (`--link RATE/DELAY`); '' for none. */
  readonly link: string;
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
    const scenario = props.scenarioFile === undefined ? undefined : fs.readFileSync(props.scenarioFile, 'utf8');

    const net = new LabNetwork(this, 'Net', { az: props.az });
    net.allowFromNodes(ec2.Port.tcp(PORTS.room), 'room: WebSocket from the generators');
    const role = nodeRole(this, 'NodeRole');
    const bucket = resultBucket(this, 'Results');
    bucket.grantReadWrite(role);
    const token = fleetToken(this, 'Token');
    token.grantRead(role);
    const asset = binaryAsset(this, 'Binary');
    asset.grantRead(role);

    const roomAddr = nodeAddress(0);
    if (props.url === undefined) {
      const ud = ec2.UserData.forLinux();
      installBase(ud, asset, token);
      installUnits(ud, [{ unit: 'wirebench-room.service', envFile: '/etc/wirebench/room.env', env: { WIREBENCH_ROOM_ARGS: `--listen 0.0.0.0:${PORTS.room}` } }]);
      this.room = labInstance(this, 'Room', {
        net, address: roomAddr, instanceType: new ec2.InstanceType(props.roomInstanceType), role,
        userData: ud, name: 'room', labTag: this.stackName, roleTag: 'room',
      }).instance;
    }
    const url = props.url ?? `ws://${roomAddr}:${PORTS.room}/rooms/demo`;
    const args = [
      scenario === undefined ? '--preset collab-ide' : '--scenario /etc/wirebench/scenario.toml',
      props.link === '' ? '' : `--link ${props.link}`,
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
        net, address: nodeAddress(i), instanceType: genType, role, userData: ud,
        name: `gen${i}`, labTag: this.stackName, roleTag: 'generator',
      });
      this.generators.push(instance);
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
