/**
 * The container files (Dockerfile, compose.yaml, deploy/kubernetes/) read as their tools read
 * them, and held to what the service does: the start command of package.json, the probes' paths,
 * the configuration variables loadConfig accepts, the drain period against the shutdown grace,
 * the non-root user. test/integration/container.spec.ts builds and runs the image where podman can.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { loadConfig, unknownVariables } from "../../src/config.js";

const root = new URL("../../", import.meta.url).pathname;
const read = (p: string) => readFileSync(`${root}${p}`, "utf8");
const K8S = "deploy/kubernetes/";

/** Every document of every manifest, by kind. */
const manifests = readdirSync(`${root}${K8S}`)
  .filter((f) => f.endsWith(".yaml"))
  .flatMap((file) =>
    parseAllDocuments(read(`${K8S}${file}`)).map((doc) => {
      expect(doc.errors, file).toEqual([]);
      return { file, doc: doc.toJS() as any };
    }),
  );
const byKind = (kind: string) => {
  const found = manifests.filter((m) => m.doc?.kind === kind);
  expect(found, kind).toHaveLength(1);
  return found[0].doc;
};

/** The Dockerfile's instructions of the final stage (after the last FROM), continuation lines joined. */
function finalStage(): string[] {
  const lines = read("Dockerfile")
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .filter((l) => l.trim() !== "" && !l.trim().startsWith("#"));
  const last = lines.map((l) => l.startsWith("FROM ")).lastIndexOf(true);
  return lines.slice(last);
}
const instruction = (name: string) => finalStage().filter((l) => l.startsWith(`${name} `));
const startCommand = JSON.parse(read("package.json")).scripts.start as string;
const env = (container: any): Record<string, string> => Object.fromEntries(container.env.map((e: any) => [e.name, e.value]));

describe("Dockerfile", () => {
  it("runs the command of `npm start` as a non-root user, with a liveness HEALTHCHECK", () => {
    const cmd = JSON.parse(instruction("CMD")[0].slice(4));
    expect(cmd.join(" ")).toBe(startCommand);
    const user = instruction("USER")[0].slice(5).trim();
    expect(user).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    expect(instruction("HEALTHCHECK")[0]).toContain("/v1/palm/health");
  });

  it("installs and compiles in the build stage only: the final stage copies, never installs", () => {
    const run = instruction("RUN");
    expect(run).toEqual([]);
    const all = read("Dockerfile");
    expect(all).toMatch(/npm run build:hand-models && npm prune --omit=dev/);
    // build:hand-models compiles dist/ first, then converts with the compiled converter.
    expect(JSON.parse(read("package.json")).scripts["build:hand-models"]).toBe("node scripts/build-dist.mjs --hand-models");
    expect(instruction("COPY").every((c) => c.startsWith("COPY --from=build "))).toBe(true);
  });

  it("copies nothing that .dockerignore leaves out or git does not have", () => {
    const allowed = read(".dockerignore")
      .split("\n")
      .filter((l) => l.startsWith("!"))
      .map((l) => l.slice(1).replace(/\/$/, ""));
    const sources = read("Dockerfile")
      .split("\n")
      .filter((l) => l.startsWith("COPY ") && !l.includes("--from="))
      .flatMap((l) => l.split(/\s+/).slice(1, -1));
    expect(sources.length).toBeGreaterThan(5);
    for (const src of sources) {
      expect(existsSync(`${root}${src}`), src).toBe(true);
      if (src === "models") continue; // only the listed model files inside it
      expect(
        allowed.some((a) => a === src || src.startsWith(`${a}/`)),
        src,
      ).toBe(true);
    }
    // The hand models are converted at build time, never copied from a checkout.
    expect(allowed.some((a) => a.startsWith("models/hands/") && a.endsWith(".onnx"))).toBe(false);
  });
});

describe("compose.yaml", () => {
  const compose = parseYaml(read("compose.yaml"));

  it("starts Redis as the tests do and the API from this Dockerfile against it", () => {
    expect(compose.services.redis.command[0]).toBe("redis-server");
    expect(compose.services.redis.command).toEqual(expect.arrayContaining(["--save", ""]));
    expect(compose.services.api.build.context).toBe(".");
    // Without NODE_IMAGE set, compose builds on the Dockerfile's own default base.
    const dockerfileBase = /^ARG NODE_IMAGE=(\S+)$/m.exec(read("Dockerfile"))?.[1];
    expect(compose.services.api.build.args.NODE_IMAGE).toBe(`\${NODE_IMAGE:-${dockerfileBase}}`);
    expect(compose.services.redis.image).toMatch(/^\$\{REDIS_IMAGE:-docker\.io\/library\/redis:7-[a-z]+\}$/);
    expect(compose.services.redis.command).toEqual(expect.arrayContaining(["--dir", "/data"]));
    expect(compose.services.api.depends_on.redis.condition).toBe("service_healthy");
    expect(compose.services.api.ports).toEqual([`\${HOST_PORT:-8080}:8080`]);
  });

  it("gives the API a configuration loadConfig accepts, with time to drain", () => {
    const e = compose.services.api.environment;
    expect(unknownVariables(e)).toEqual([]);
    const config = loadConfig({ ...e, PALM_SHUTDOWN_GRACE_MS: "20000" });
    expect(config.redisUrl).toBe("redis://redis:6379");
    expect(Number.parseInt(compose.services.api.stop_grace_period, 10)).toBeGreaterThan(config.shutdownGraceMs / 1000);
  });
});

describe("deploy/kubernetes", () => {
  const deployment = byKind("Deployment");
  const pod = deployment.spec.template.spec;
  const api = pod.containers[0];

  it("parses, every document with its apiVersion, kind and name, and kustomization lists the rest", () => {
    for (const { file, doc } of manifests) {
      expect(doc.apiVersion, file).toBeTypeOf("string");
      expect(doc.kind, file).toBeTypeOf("string");
      if (doc.kind !== "Kustomization") expect(doc.metadata.name, file).toBeTypeOf("string");
    }
    const listed = byKind("Kustomization").resources.sort();
    const files = manifests.map((m) => m.file).filter((f) => f !== "kustomization.yaml" && !f.includes(".example."));
    expect(listed).toEqual([...new Set(files)].sort());
  });

  it("probes liveness on /v1/palm/health and readiness on /v1/palm/ready, on the container's PORT", () => {
    const port = api.ports.find((p: any) => p.name === "http").containerPort;
    expect(String(port)).toBe(env(api).PORT);
    expect(api.livenessProbe.httpGet).toEqual({ path: "/v1/palm/health", port: "http" });
    expect(api.startupProbe.httpGet).toEqual({ path: "/v1/palm/health", port: "http" });
    expect(api.readinessProbe.httpGet).toEqual({ path: "/v1/palm/ready", port: "http" });
  });

  it("gives the pod more time than preStop, the shutdown grace and the engine's close together", () => {
    const grace = loadConfig({ ...env(api), REDIS_URL: "redis://r:6379" }).shutdownGraceMs / 1000;
    const preStop = Number(api.lifecycle.preStop.exec.command[1]);
    const closeWait = 10; // src/inference/admission.ts, CLOSE_WAIT_MS
    expect(api.lifecycle.preStop.exec.command[0]).toBe("sleep");
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + grace + closeWait);
  });

  it("reads the store from the palm-redis Secret, and every variable it sets is one loadConfig accepts", () => {
    expect(api.envFrom).toEqual([{ secretRef: { name: "palm-redis" } }]);
    const secret = parseYaml(read(`${K8S}redis-secret.example.yaml`));
    expect(secret.metadata.name).toBe("palm-redis");
    expect(unknownVariables(env(api))).toEqual([]);
    expect(() => loadConfig({ ...env(api), ...secret.stringData })).not.toThrow();
  });

  it("runs as the image's non-root user, read-only, with nothing to escalate", () => {
    const [uid, gid] = instruction("USER")[0].slice(5).trim().split(":").map(Number);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: uid, runAsGroup: gid });
    expect(api.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    });
  });

  it("keeps a replica through voluntary disruptions and scales the Deployment on CPU", () => {
    const labels = deployment.spec.template.metadata.labels;
    const pdb = byKind("PodDisruptionBudget");
    expect(labels).toMatchObject(pdb.spec.selector.matchLabels);
    expect(pdb.spec.minAvailable).toBeGreaterThanOrEqual(1);
    expect(byKind("Service").spec.selector).toEqual(deployment.spec.selector.matchLabels);
    const hpa = byKind("HorizontalPodAutoscaler");
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: deployment.metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThan(pdb.spec.minAvailable);
    expect(hpa.spec.metrics[0].resource.name).toBe("cpu");
    expect(api.resources.requests.cpu).toBeDefined(); // CPU utilisation is measured against the request
    expect(env(api).PALM_WORKERS).toBe(String(api.resources.requests.cpu));
  });
});
