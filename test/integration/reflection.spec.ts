/**
 * gRPC server reflection (grpc.reflection.v1) on a real server: `buf curl` lists the services and
 * calls them with no schema at hand, and the protocol's own answers for unknown names.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { createFileRegistry, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ServerReflection,
  type ServerReflectionRequestSchema,
  type ServerReflectionResponse,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { startKeyedServer, type KeyedTestServer } from "../helpers/server.js";

const run = promisify(execFile);
const root = new URL("../../", import.meta.url).pathname;
const buf = `${root}node_modules/.bin/buf`;
let analyzer: EngineAnalyzer;
let srv: KeyedTestServer;
let key: string;

beforeAll(async () => {
  analyzer = await createTestAnalyzer();
  srv = await startKeyedServer({ analyzer, client: "tools", plan: "free" });
  key = srv.key;
});
afterAll(async () => {
  await srv?.close();
  await analyzer?.close();
});

const grpcFlags = () => ["curl", "--http2-prior-knowledge", "--protocol", "grpc"];

/** ask sends reflection requests on one stream and collects the answers. */
async function ask(...requests: MessageInitShape<typeof ServerReflectionRequestSchema>[]): Promise<ServerReflectionResponse[]> {
  const client = createClient(ServerReflection, createGrpcTransport({ baseUrl: srv.url }));
  async function* input() {
    for (const r of requests) yield r;
  }
  const out: ServerReflectionResponse[] = [];
  for await (const res of client.serverReflectionInfo(input())) out.push(res);
  return out;
}

describe("grpc.reflection.v1.ServerReflection", () => {
  it("lets buf curl list the services with no schema and no key", async () => {
    const { stdout } = await run(buf, [...grpcFlags(), "--list-services", srv.url]);
    expect(stdout.trim().split("\n").sort()).toEqual([
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
      "palm.v1.PalmService",
    ]);
    const methods = await run(buf, [...grpcFlags(), "--list-methods", srv.url]);
    expect(methods.stdout).toContain("palm.v1.PalmService/Analyze");
  });

  it("lets buf curl call Analyze from the reflected schema alone", async () => {
    const image = readFileSync(`${root}examples/sample-palm.jpg`).toString("base64");
    // The body goes through stdin (-d @-): a photo's base64 is longer than one argument may be.
    const call = run(buf, [...grpcFlags(), "-H", `x-api-key: ${key}`, "-d", "@-", `${srv.url}/palm.v1.PalmService/Analyze`], {
      maxBuffer: 64 * 1024 * 1024,
    });
    call.child.stdin!.end(JSON.stringify({ image }));
    const { stdout } = await call;
    const json = JSON.parse(stdout);
    expect(json.object).toBe("palm.analysis");
    expect(json.model).toBe(analyzer.model);
    expect(Object.keys(json.results.stats).sort()).toEqual(["head", "heart", "life"]);
  });

  it("also answers over the Connect protocol on HTTP/1.1", async () => {
    const { stdout } = await run(buf, ["curl", "--protocol", "connect", `${srv.url}/palm.v1.PalmService/Health`]);
    expect(JSON.parse(stdout)).toEqual({ status: "ok" });
  });

  it("answers a file by symbol with the file and every file it imports, which build a registry", async () => {
    const [res] = await ask({ messageRequest: { case: "fileContainingSymbol", value: "palm.v1.AnalyzeResponse" } });
    expect(res.messageResponse.case).toBe("fileDescriptorResponse");
    const protos = (res.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto.map((b) =>
      fromBinary(FileDescriptorProtoSchema, b),
    );
    expect(protos[0].name).toBe("palm/v1/palm.proto");
    expect(protos.map((p) => p.name)).toEqual(
      expect.arrayContaining(["google/api/annotations.proto", "google/api/http.proto", "google/protobuf/descriptor.proto"]),
    );
    const registry = createFileRegistry(protos[0], (name) => protos.find((p) => p.name === name));
    expect(registry.getMessage("palm.v1.LineStats")?.fields.map((f) => f.name)).toContain("detected");
  });

  it("answers NOT_FOUND in an error_response for an unknown symbol or file, and goes on", async () => {
    const answers = await ask(
      { messageRequest: { case: "fileContainingSymbol", value: "palm.v1.Nope" } },
      { messageRequest: { case: "fileByFilename", value: "nope.proto" } },
      { messageRequest: { case: "listServices", value: "" } },
    );
    expect(answers.map((a) => a.messageResponse.case)).toEqual(["errorResponse", "errorResponse", "listServicesResponse"]);
    expect((answers[0].messageResponse.value as { errorCode: number }).errorCode).toBe(Code.NotFound);
  });
});
