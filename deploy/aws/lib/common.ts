// Pieces both labs share: the network, the node role, the binary asset and the user data
// that installs wirebench with the systemd units of deploy/systemd/.
import * as fs from 'fs';
import * as path from 'path';
import * as cdk from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';
import * as secrets from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';

/** deploy/systemd, whose units the nodes install as they are. */
export const SYSTEMD_DIR = path.join(__dirname, '..', '..', 'systemd');
/** What synth stages when no binary is given: a script that says so and fails. */
export const PLACEHOLDER_BINARY = path.join(__dirname, '..', 'assets', 'wirebench-placeholder');

/** The lab's one subnet: nodes get fixed addresses in it, from .10 up. */
export const LAB_CIDR = '10.42.0.0/16';
export const SUBNET_PREFIX = '10.42.0.';
// 100 nodes: the largest user data (relay, 99 peers twice, three units) is about 11.5 KiB of 16.
export const MAX_NODES = 100;

export const PORTS = {
  /** mesh agent: its serve (UDP and TCP probes) and its HTTP API */
  agent: 7878,
  http: 9878,
  /** wirebench serve, for ping and stream by hand */
  serve: 7879,
  /** wirebench relay */
  relay: 7880,
  /** wirebench room (LoadLab) */
  room: 8080,
};

/** The binary to ship: context `binary`, else $WIREBENCH_BINARY, else the placeholder. */
export function binaryPath(scope: Construct): { path: string; placeholder: boolean } {
  const given = scope.node.tryGetContext('binary') ?? process.env.WIREBENCH_BINARY;
  if (given === undefined || given === '') {
    return { path: PLACEHOLDER_BINARY, placeholder: true };
  }
  const p = path.resolve(String(given));
  if (!fs.existsSync(p) || !fs.statSync(p).isFile()) {
    throw new Error(`binary: ${p} is not a file (build it first, see docs/deploy/aws.md)`);
  }
  return { path: p, placeholder: false };
}

export function systemdUnit(name: string): string {
  return fs.readFileSync(path.join(SYSTEMD_DIR, name), 'utf8');
}

/** A file written by user data through a quoted heredoc (no expansion inside). */
export function writeFile(dest: string, mode: string, content: string): string[] {
  const tag = 'WIREBENCH_EOF';
  if (content.includes(tag)) {
    throw new Error(`${dest}: content holds the heredoc tag ${tag}`);
  }
  const body = content.endsWith('\n') ? content : content + '\n';
  return [`install -d -m 0755 ${path.posix.dirname(dest)}`, `cat > ${dest} <<'${tag}'\n${body}${tag}`, `chmod ${mode} ${dest}`];
}

export function nodeAddress(i: number): string {
  return `${SUBNET_PREFIX}${10 + i}`;
}

/** Node i's address in the lab's n-th /24 (0: the lab subnet, 1 and 2: `extraSubnets`). */
export function subnetAddress(n: number, i: number): string {
  return `10.42.${n}.${10 + i}`;
}

export interface LabNetworkProps {
  readonly az: string;
  /**
   * Further isolated /24 subnets by name, after `lab` (10.42.0.0/24): 10.42.1.0/24, then
   * 10.42.2.0/24. LoadLab's NAT variant puts the generators and the app in two of them.
   */
  readonly extraSubnets?: string[];
}

/**
 * A VPC with one isolated subnet (no internet gateway, no NAT, no public address) and the
 * endpoints the nodes need: S3 (gateway) for the binary and the results, SSM's three for
 * Session Manager and send-command, Secrets Manager for the fleet token.
 */
export class LabNetwork extends Construct {
  readonly vpc: ec2.Vpc;
  readonly subnet: ec2.ISubnet;
  readonly securityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: LabNetworkProps) {
    super(scope, id);
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr(LAB_CIDR),
      availabilityZones: [props.az],
      natGateways: 0,
      restrictDefaultSecurityGroup: false,
      subnetConfiguration: ['lab', ...(props.extraSubnets ?? [])].map((name) => ({ name, subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 24 })),
      // Every subnet's route table gets the S3 route (the binary, the results).
      gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3 } },
    });
    this.subnet = this.subnetNamed('lab');
    const endpointSg = new ec2.SecurityGroup(this, 'EndpointSg', {
      vpc: this.vpc,
      description: 'wirebench lab: HTTPS to the interface endpoints from the lab nodes',
      allowAllOutbound: false,
    });
    for (const [name, service] of [
      ['Ssm', ec2.InterfaceVpcEndpointAwsService.SSM],
      ['SsmMessages', ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES],
      ['Ec2Messages', ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES],
      ['SecretsManager', ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER],
    ] as const) {
      this.vpc.addInterfaceEndpoint(name, { service, securityGroups: [endpointSg], open: false, privateDnsEnabled: true, subnets: { subnets: [this.subnet] } });
    }
    this.securityGroup = new ec2.SecurityGroup(this, 'NodeSg', {
      vpc: this.vpc,
      description: 'wirebench lab nodes: probe, serve, relay, HTTP and group traffic from each other only',
      allowAllOutbound: true,
    });
    endpointSg.addIngressRule(this.securityGroup, ec2.Port.tcp(443), 'HTTPS from the lab nodes');
  }

  /** The one subnet of a group (`lab`, or one of `extraSubnets`). */
  subnetNamed(name: string): ec2.ISubnet {
    const subnets = this.vpc.selectSubnets({ subnetGroupName: name }).subnets;
    if (subnets.length !== 1) throw new Error(`subnet group ${name}: ${subnets.length} subnets, not 1`);
    return subnets[0];
  }

  /** Admit a port from the lab nodes themselves (the group references itself). */
  allowFromNodes(port: ec2.Port, what: string): void {
    this.securityGroup.addIngressRule(this.securityGroup, port, what);
  }
}

/** What a lab's nodes reach, and the one place their role is granted it. */
export interface LabAccess {
  role: iam.Role;
  bucket: s3.Bucket;
  token: secrets.Secret;
  asset: s3assets.Asset;
}

/** The node role with its grants: the result bucket (read and write), the fleet token and
 * the binary asset (read); nothing else (test/checks.ts `checkIam`). */
export function labAccess(scope: Construct): LabAccess {
  const role = nodeRole(scope, 'NodeRole');
  const bucket = resultBucket(scope, 'Results');
  bucket.grantReadWrite(role);
  const token = fleetToken(scope, 'Token');
  token.grantRead(role);
  const asset = binaryAsset(scope, 'Binary');
  asset.grantRead(role);
  return { role, bucket, token, asset };
}

/** The node role: Session Manager, the binary asset, the token, the result bucket. */
function nodeRole(scope: Construct, id: string): iam.Role {
  return new iam.Role(scope, id, {
    assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
    description: 'wirebench lab node: SSM core, the binary asset, the fleet token, the result bucket',
    managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore')],
  });
}

function resultBucket(scope: Construct, id: string): s3.Bucket {
  return new s3.Bucket(scope, id, {
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    encryption: s3.BucketEncryption.S3_MANAGED,
    enforceSSL: true,
    versioned: false,
    // Results outlive the lab: `cdk destroy` leaves the bucket (docs/deploy/aws.md).
    removalPolicy: cdk.RemovalPolicy.RETAIN,
  });
}

/** The fleet's shared token (mesh probes' MAC, relay datagrams' MAC, serve's stream token). */
function fleetToken(scope: Construct, id: string): secrets.Secret {
  return new secrets.Secret(scope, id, {
    description: 'wirebench lab token (mesh, relay, serve)',
    generateSecretString: { passwordLength: 32, excludePunctuation: true, includeSpace: false },
    removalPolicy: cdk.RemovalPolicy.DESTROY,
  });
}

/** The binary asset, with a synth-time warning when it is the placeholder. */
function binaryAsset(scope: Construct, id: string): s3assets.Asset {
  const bin = binaryPath(scope);
  const asset = new s3assets.Asset(scope, id, { path: bin.path });
  if (bin.placeholder) {
    cdk.Annotations.of(scope).addWarningV2(
      'wirebench:placeholder-binary',
      'no wirebench binary given: the nodes get a placeholder; deploy with -c binary=PATH (docs/deploy/aws.md)',
    );
  }
  return asset;
}

/** User data's first part: the binary and the token, fetched through the endpoints. */
export function installBase(ud: ec2.UserData, asset: s3assets.Asset, token: secrets.ISecret): void {
  ud.addCommands('set -euo pipefail', 'exec > >(tee -a /var/log/wirebench-setup.log) 2>&1');
  ud.addS3DownloadCommand({ bucket: asset.bucket, bucketKey: asset.s3ObjectKey, localFile: '/usr/local/bin/wirebench' });
  ud.addCommands(
    'chmod 0755 /usr/local/bin/wirebench',
    'install -d -m 0755 /etc/wirebench',
    'umask 077',
    `aws secretsmanager get-secret-value --secret-id ${token.secretArn} --query SecretString --output text > /etc/wirebench/token`,
    'chmod 0600 /etc/wirebench/token',
    'umask 022',
  );
}

/** Writes and starts systemd units from deploy/systemd/ with their environment files. */
export interface UnitInstall {
  readonly unit: string;
  readonly envFile: string;
  readonly env: Record<string, string>;
  /** The environment file's mode (default 0640; 0600 when it holds a secret). */
  readonly mode?: string;
}

export function installUnits(ud: ec2.UserData, units: UnitInstall[], beforeStart: string[] = []): void {
  for (const u of units) {
    ud.addCommands(...writeFile(`/etc/systemd/system/${u.unit}`, '0644', systemdUnit(u.unit)));
    const env = Object.entries(u.env).map(([k, v]) => `${k}=${v}`).join('\n');
    ud.addCommands(...writeFile(u.envFile, u.mode ?? '0640', env));
  }
  ud.addCommands(...beforeStart, 'systemctl daemon-reload', `systemctl enable --now ${units.map((u) => u.unit).join(' ')}`);
}

/** The AL2023 image for the instance type's architecture, through its public SSM parameter. */
export function al2023(instanceType: ec2.InstanceType): ec2.IMachineImage {
  const cpuType = instanceType.architecture === ec2.InstanceArchitecture.ARM_64 ? ec2.AmazonLinuxCpuType.ARM_64 : ec2.AmazonLinuxCpuType.X86_64;
  return ec2.MachineImage.latestAmazonLinux2023({ cpuType });
}

export function checkCount(what: string, n: number, min: number, max: number): number {
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${what}: ${n} is not a whole number from ${min} to ${max}`);
  }
  return n;
}

export interface LabInstanceProps {
  readonly net: LabNetwork;
  readonly address: string;
  readonly instanceType: ec2.InstanceType;
  readonly role: iam.IRole;
  readonly userData: ec2.UserData;
  readonly name: string;
  readonly labTag: string;
  readonly roleTag: string;
  readonly placementGroup?: ec2.IPlacementGroup;
  /** The subnet of its ENI (default: the lab subnet). */
  readonly subnet?: ec2.ISubnet;
  /** false for a node that forwards others' packets (LoadLab's NAT instance). */
  readonly sourceDestCheck?: boolean;
}

/** User data is at most 16 KiB; tokens (bucket, ARN) add about 200 bytes when resolved. */
export const USER_DATA_MAX = 16384 - 512;

/**
 * A node whose one network interface is an ENI with a fixed address (a TGW multicast
 * domain registers ENIs), so the instance names no subnet, group or address of its own.
 */
export function labInstance(scope: Construct, id: string, p: LabInstanceProps): { instance: ec2.Instance; eni: ec2.CfnNetworkInterface } {
  const text = p.userData.render();
  if (Buffer.byteLength(text, 'utf8') > USER_DATA_MAX) {
    throw new Error(`${p.name}: user data is ${Buffer.byteLength(text, 'utf8')} bytes, past the ${USER_DATA_MAX} EC2 allows here (fewer nodes, or a smaller scenario)`);
  }
  const subnet = p.subnet ?? p.net.subnet;
  const eni = new ec2.CfnNetworkInterface(scope, `${id}Eni`, {
    subnetId: subnet.subnetId,
    sourceDestCheck: p.sourceDestCheck,
    privateIpAddress: p.address,
    groupSet: [p.net.securityGroup.securityGroupId],
    description: `wirebench ${p.name}`,
  });
  const instance = new ec2.Instance(scope, id, {
    vpc: p.net.vpc,
    vpcSubnets: { subnets: [subnet] },
    instanceType: p.instanceType,
    machineImage: al2023(p.instanceType),
    placementGroup: p.placementGroup,
    role: p.role,
    securityGroup: p.net.securityGroup,
    userData: p.userData,
    requireImdsv2: true,
    privateIpAddress: p.address,
    instanceName: `wirebench-${p.name}`,
  });
  const cfn = instance.node.defaultChild as ec2.CfnInstance;
  cfn.addPropertyDeletionOverride('SubnetId');
  cfn.addPropertyDeletionOverride('SecurityGroupIds');
  cfn.addPropertyDeletionOverride('PrivateIpAddress');
  cfn.addPropertyOverride('NetworkInterfaces', [{ DeviceIndex: '0', NetworkInterfaceId: eni.ref }]);
  cdk.Tags.of(instance).add('wirebench:lab', p.labTag);
  cdk.Tags.of(instance).add('wirebench:role', p.roleTag);
  cdk.Tags.of(instance).add('wirebench:node', p.name);
  return { instance, eni };
}

/** An `aws ssm send-command` line running one shell command on the given instances. */
export function sendCommand(stack: cdk.Stack, instanceIds: string, what: string, cmd: string): string {
  return (
    `aws ssm send-command --region ${stack.region} --instance-ids ${instanceIds} --document-name AWS-RunShellScript ` +
    `--comment '${what}' --parameters '${JSON.stringify({ commands: [cmd] })}' --query Command.CommandId --output text`
  );
}
