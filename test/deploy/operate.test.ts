/**
 * What an operator deploys beside the image (deploy/, docs/deploy.md), checked without a cluster:
 * the Kubernetes manifests valid against the API's schemas (kubernetes-models) and with the
 * invariants the drain relies on; every metric the Grafana dashboard, the alert rules and the
 * autoscaler name is one this server's /metrics serves; the alert rules checked and unit-tested by
 * Prometheus's own `promtool` (Debian's `prometheus`; skipped with a warning without it, required
 * in CI with REQUIRE_PROMTOOL). Kamailio's configuration runs for real in test/calls/kamailio.test.ts.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Service, ConfigMap, Secret } from 'kubernetes-models/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { loadConfig } from '../../src/config.js';
import { repoFile } from './deploy-files.js';
import { startCallingServer, type CallingServer } from '../helpers/calls.js';

const run = promisify(execFile);
const DEPLOY = join(import.meta.dirname, '../../deploy');
const promtool = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
if (!promtool) {
  if (process.env.REQUIRE_PROMTOOL) throw new Error('REQUIRE_PROMTOOL is set but promtool is not installed (apt-get install prometheus)');
  console.warn('[promtool checks skipped] no promtool: apt-get install prometheus');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Manifest = { apiVersion: string; kind: string; metadata: { name: string }; spec?: any; [k: string]: unknown };
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
};

function manifests(): Array<{ file: string; doc: Manifest }> {
  const dir = join(DEPLOY, 'kubernetes');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .flatMap((file) => parseAllDocuments(repoFile(`deploy/kubernetes/${file}`)).map((d) => ({ file, doc: d.toJS() as Manifest })));
}
const byKind = (kind: string) => manifests().find((m) => m.doc.kind === kind)!.doc;

/** Metric names in a PromQL expression (switchboard_…, without the histogram suffixes). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(switchboard_[a-z0-9_]+)/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ''));
}

let server: CallingServer;
let served: Set<string>;

beforeAll(async () => {
  // a whole server, SIP on: every metric family it can serve
  server = await startCallingServer({}, { sip: { port: 0 } });
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  served = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
});
afterAll(async () => {
  await server?.close();
});

describe('the Kubernetes manifests', () => {
  it('are each valid against the Kubernetes API schema of their kind, and kustomization lists them', () => {
    const all = manifests();
    expect(all.map((m) => m.doc.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'Secret', 'Service']);
    for (const { file, doc } of all) {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      expect(Model, `${file}: ${doc.apiVersion} ${doc.kind}`).toBeDefined();
      expect(() => new Model!(doc as never).validate(), file).not.toThrow();
    }
    const kustomization = parseAllDocuments(repoFile('deploy/kubernetes/kustomization.yaml'))[0]!.toJS() as { resources: string[] };
    expect(kustomization.resources.sort()).toEqual(['configmap.yaml', 'deployment.yaml', 'hpa.yaml', 'pdb.yaml', 'service.yaml']);
  });

  it('a wrong manifest is refused by the same check (the check can fail)', () => {
    const deployment = structuredClone(byKind('Deployment'));
    deployment.spec.template.spec.containers[0].ports[0].containerPort = 'three thousand';
    expect(() => new Deployment(deployment as never).validate()).toThrow(/containerPort/);
  });

  it('drain before stop: the pre-stop hook signals the server and waits for it, within a grace period longer than the server\'s', () => {
    const deployment = byKind('Deployment');
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    const env = Object.fromEntries(container.env.filter((e: { value?: string }) => e.value !== undefined).map((e: { name: string; value: string }) => [e.name, e.value]));
    // the server's own grace, as it reads it
    const grace = loadConfig({ SHUTDOWN_GRACE_SECONDS: env.SHUTDOWN_GRACE_SECONDS }).SHUTDOWN_GRACE_SECONDS;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(grace + 5);
    expect(container.lifecycle.preStop.exec.command.join(' ')).toMatch(/kill -TERM 1;.*while kill -0 1/);
    // the image stops on SIGTERM (the Dockerfile's STOPSIGNAL), and its server is PID 1 (exec form CMD)
    expect(repoFile('Dockerfile')).toMatch(/^STOPSIGNAL SIGTERM$/m);
    expect(repoFile('Dockerfile')).toMatch(/^CMD \["node",/m);
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    // a rolling update never takes a process away before its replacement is ready
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
    expect(loadConfig({ SIP_PORT: env.SIP_PORT }).SIP_PORT).toBe(0);
  });

  it('the Service, the budget and the autoscaler select the Deployment\'s pods; the autoscaler scales on a metric the server serves', () => {
    const labels = byKind('Deployment').spec.template.metadata.labels;
    expect(byKind('Service').spec.selector).toEqual(labels);
    expect(byKind('PodDisruptionBudget').spec.selector.matchLabels).toEqual(labels);
    const hpa = byKind('HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: byKind('Deployment').metadata.name });
    const metric = hpa.spec.metrics[0].pods.metric.name as string;
    expect(served).toContain(metric);
  });
});

describe('the Grafana dashboard and the alert rules', () => {
  it('name only metrics the server serves', () => {
    const dashboard = JSON.parse(repoFile('deploy/grafana/switchboard.json')) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
    const rules = parseAllDocuments(repoFile('deploy/prometheus/alerts.yml'))[0]!.toJS() as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
    const used = [
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
      ...rules.groups.flatMap((g) => g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr }))),
    ];
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(10);
    for (const { where, expr } of used) {
      for (const name of metricNames(expr)) expect(served, `${where}: ${name}`).toContain(name);
    }
    // the SIP and RTP metrics are served where SIP runs: the runtime's own registry has them
    expect(used.some((u) => u.expr.includes('switchboard_rtp_loss_ratio'))).toBe(true);
  });

  it.skipIf(!promtool)('promtool checks the rules and the scrape configuration, and the rules\' unit tests pass', async () => {
    const dir = join(DEPLOY, 'prometheus');
    const rules = await run('promtool', ['check', 'rules', 'alerts.yml'], { cwd: dir });
    expect(rules.stdout).toMatch(/SUCCESS: \d+ rules found/);
    await run('promtool', ['check', 'config', 'prometheus.yml'], { cwd: dir });
    const tests = await run('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: dir });
    expect(`${tests.stdout}${tests.stderr}`).toMatch(/SUCCESS/);
  });
});
