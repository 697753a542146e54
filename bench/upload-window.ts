/**
 * What HTTP/2 receive windows cost a gRPC client uploading a phone photo over a link with latency
 * (the upload-window scenario). Two servers side by side in this process, ours
 * (H2_STREAM_WINDOW / H2_CONNECTION_WINDOW) and one with HTTP/2's default 65,535-byte windows, each
 * connected directly (loopback) and then behind a TCP proxy that holds every chunk for a one-way
 * delay (0, 2 and 5 ms: round trips of 0, 4 and 10 ms, plus the proxy's own hop). Each call sends
 * 3.6 MB that start like a JPEG but are noise, so the service refuses it (invalid_image,
 * uncharged) as soon as it has read it all: the time is the upload and one answer.
 * Calls alternate between the two servers, so a drift of the shared machine hits both alike.
 */
import * as grpc from "@grpc/grpc-js";
import { randomBytes } from "node:crypto";
import net from "node:net";
import { PalmService } from "../gen/palm/v1/palm_pb.js";
import { createMemoryStore } from "../src/auth/memory-store.js";
import { createTestConfig } from "../test/helpers/config.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import { createLogger } from "../src/log.js";
import { createPalmServer, H2_CONNECTION_WINDOW, H2_STREAM_WINDOW } from "../src/server/server.js";
import { callUnary, createGrpcJsClient, registerKey } from "../test/helpers/index.js";
import { median } from "./stats.js";

/** A TCP proxy that passes every chunk on after `oneWayMs`, in order, both ways. */
async function delayingProxy(target: number, oneWayMs: number): Promise<net.Server> {
  const relay = (from: net.Socket, to: net.Socket) => {
    let last = 0;
    from.on("data", (chunk) => {
      const at = Math.max(last, performance.now() + oneWayMs);
      last = at;
      setTimeout(() => to.write(chunk), at - performance.now());
    });
    from.on("end", () => setTimeout(() => to.end(), oneWayMs + 1));
    from.on("error", () => to.destroy());
  };
  const proxy = net.createServer((client) => {
    const upstream = net.connect(target, "127.0.0.1");
    relay(client, upstream);
    relay(upstream, client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return proxy;
}

/** UploadRow is one link's median upload time per server, ms. */
export interface UploadRow {
  /** One-way delay of the proxy, ms; undefined: loopback without a proxy. */
  oneWayMs?: number;
  /** Median ms per variant: [ours, HTTP/2 default]. */
  ms: [number, number];
}

/** uploadWindows measures `calls` uploads per server and link (after one that opens the connection). */
export async function uploadWindows(calls: number): Promise<{ variants: string[]; rows: UploadRow[] }> {
  const analyzer = await createAnalyzer({ workers: 1 });
  const store = createMemoryStore();
  const key = await registerKey(store, "bench", "pro");
  const logger = createLogger({ level: "silent" });
  const variants = [
    { name: `ours (${H2_STREAM_WINDOW / 2 ** 20} MiB stream, ${H2_CONNECTION_WINDOW / 2 ** 20} MiB connection)`, windows: undefined },
    { name: "HTTP/2 default (64 KiB)", windows: { stream: 65535, connection: 65535 } },
  ];
  const servers = await Promise.all(
    variants.map(async (v) => {
      const server = createPalmServer({
        analyzer,
        store,
        config: createTestConfig({ port: 0, host: "127.0.0.1" }),
        logger,
        h2Windows: v.windows,
      });
      return { server, port: await server.listen() };
    }),
  );
  const image = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), randomBytes(3_600_000)]);

  const rows: UploadRow[] = [];
  for (const oneWayMs of [undefined, 0, 2, 5]) {
    const proxies = oneWayMs === undefined ? [] : await Promise.all(servers.map((s) => delayingProxy(s.port, oneWayMs)));
    const clients = servers.map((s, i) => createGrpcJsClient(proxies[i] ? (proxies[i].address() as net.AddressInfo).port : s.port));
    const times: number[][] = variants.map(() => []);
    for (let i = 0; i <= calls; i++) {
      for (let v = 0; v < variants.length; v++) {
        const t0 = performance.now();
        const r = await callUnary(clients[v], PalmService.method.analyze, { image }, { "x-api-key": key });
        if (r.error?.code !== grpc.status.INVALID_ARGUMENT) throw new Error(`unexpected answer: ${r.error?.code} ${r.error?.details}`);
        if (i > 0) times[v].push(performance.now() - t0); // call 0 opens the connection
      }
    }
    for (const c of clients) c.close();
    await Promise.all(proxies.map((p) => new Promise((r) => p.close(r))));
    rows.push({ oneWayMs, ms: [median(times[0]), median(times[1])] });
  }
  await Promise.all(servers.map((s) => s.server.shutdown(1000)));
  await analyzer.close();
  return { variants: variants.map((v) => v.name), rows };
}
