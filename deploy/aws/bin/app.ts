#!/usr/bin/env node
// The wirebench labs on AWS (docs/deploy/aws.md). Every setting is CDK context (-c key=value),
// read at synth time. The stacks are environment-agnostic (account and region come from the
// deploy's credentials) and do no lookups, so `cdk synth` needs no AWS account.
import * as cdk from 'aws-cdk-lib';
import { LatencyLab, parseGroups, parseMulticast } from '../lib/latency-lab';
import { LoadLab, defaultStartAt, parseShaping } from '../lib/load-lab';

const app = new cdk.App();
const ctx = (k: string, d: string): string => String(app.node.tryGetContext(k) ?? d);

try {
  new LatencyLab(app, ctx('latencyStack', 'WirebenchLatencyLab'), {
    nodes: Number(ctx('nodes', '3')),
    instanceType: ctx('instanceType', 'c6in.xlarge'),
    az: ctx('az', 'us-east-1a'),
    multicast: parseMulticast(ctx('multicast', 'relay')),
    groups: parseGroups(ctx('groups', '239.255.79.1:7877')),
    replyGroup: ctx('replyGroup', '239.255.79.2:7881'),
  });
  new LoadLab(app, ctx('loadStack', 'WirebenchLoadLab'), {
    shards: Number(ctx('shards', '3')),
    instanceType: ctx('generatorType', 'c6i.large'),
    roomInstanceType: ctx('roomType', 'c6i.large'),
    az: ctx('az', 'us-east-1a'),
    url: app.node.tryGetContext('url'),
    scenarioFile: app.node.tryGetContext('scenario'),
    link: ctx('link', '60.76mbit/10ms'),
    shaping: parseShaping(ctx('shaping', 'link')),
    natInstanceType: ctx('natType', 'c6in.large'),
    extraArgs: ctx('loadArgs', '--seed 1'),
    // The default gives the deploy 20 minutes; RerunCommand (an output) picks a new time.
    startAt: ctx('startAt', defaultStartAt(20)),
  });
} catch (e) {
  console.error(`wirebench-aws: ${(e as Error).message}`);
  process.exit(2);
}
