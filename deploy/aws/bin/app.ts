#!/usr/bin/env node
import * as cdk from 'aws-cdk-lib';
import { LatencyLab } from '../lib/latency-lab';

const app = new cdk.App();
const ctx = (k: string, d: string): string => String(app.node.tryGetContext(k) ?? d);
new LatencyLab(app, 'WirebenchLatencyLab', {
  nodes: Number(ctx('nodes', '3')),
  instanceType: ctx('instanceType', 'c6in.xlarge'),
  az: ctx('az', 'us-east-1a'),
});
