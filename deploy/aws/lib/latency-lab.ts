import * as cdk from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

export interface LatencyLabProps extends cdk.StackProps {
  /** Number of nodes in the placement group. */
  readonly nodes: number;
  readonly instanceType: string;
  readonly az: string;
}

export class LatencyLab extends cdk.Stack {
  constructor(scope: Construct, id: string, props: LatencyLabProps) {
    super(scope, id, props);
    const vpc = new ec2.Vpc(this, 'Vpc', {
      ipAddresses: ec2.IpAddresses.cidr('10.42.0.0/16'),
      availabilityZones: [props.az],
      natGateways: 0,
      subnetConfiguration: [{ name: 'lab', subnetType: ec2.SubnetType.PRIVATE_ISOLATED, cidrMask: 24 }],
    });
    const pg = new ec2.PlacementGroup(this, 'PlacementGroup', { strategy: ec2.PlacementGroupStrategy.CLUSTER });
    const role = new iam.Role(this, 'NodeRole', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      managedPolicies: [iam.ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore')],
    });
    for (let i = 1; i <= props.nodes; i++) {
      new ec2.Instance(this, `Node${i}`, {
        vpc,
        instanceType: new ec2.InstanceType(props.instanceType),
        machineImage: ec2.MachineImage.latestAmazonLinux2023(),
        placementGroup: pg,
        role,
        privateIpAddress: `10.42.0.${10 + i}`,
      });
    }
  }
}
