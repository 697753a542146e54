/**
 * gRPC server reflection, `grpc.reflection.v1.ServerReflection`: lists the services served and
 * hands out their file descriptors (with every file they import), so that `buf curl` or grpcurl
 * can call the service without a copy of the proto. Built from the generated descriptors of the
 * services registered, so it always describes what is served. No key needed (the schema is public,
 * as /openapi.json is). test/integration/reflection.spec.ts runs `buf curl` against it.
 */
import { toBinary, type DescFile, type DescMessage, type DescService, type MessageInitShape } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import type { ServiceImpl } from "@connectrpc/connect";
import type {
  ServerReflection,
  ServerReflectionRequest,
  ServerReflectionResponseSchema,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";

/** Answer is the oneof part of one response. */
type Answer = Pick<MessageInitShape<typeof ServerReflectionResponseSchema>, "messageResponse">;

/** ReflectionServiceOptions configure {@link createReflectionService}. */
export interface ReflectionServiceOptions {
  /** The services served (the reflection service itself included), as listed by list_services. */
  services: readonly DescService[];
}

/** createReflectionService returns the `grpc.reflection.v1.ServerReflection` implementation. */
export function createReflectionService(options: ReflectionServiceOptions): ServiceImpl<typeof ServerReflection> {
  const files = new Map<string, DescFile>();
  const symbols = new Map<string, DescFile>();
  const addMessage = (m: DescMessage, file: DescFile) => {
    symbols.set(m.typeName, file);
    for (const n of m.nestedMessages) addMessage(n, file);
    for (const e of m.nestedEnums) symbols.set(e.typeName, file);
    for (const x of m.nestedExtensions) symbols.set(x.typeName, file);
  };
  const addFile = (file: DescFile) => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    for (const s of file.services) {
      symbols.set(s.typeName, file);
      for (const m of s.methods) symbols.set(`${s.typeName}.${m.name}`, file);
    }
    for (const m of file.messages) addMessage(m, file);
    for (const e of file.enums) symbols.set(e.typeName, file);
    for (const x of file.extensions) symbols.set(x.typeName, file);
    for (const d of file.dependencies) addFile(d);
  };
  for (const s of options.services) addFile(s.file);
  const serviceNames = options.services.map((s) => ({ name: s.typeName }));

  /** A file and everything it imports, each serialized once, the file itself first. */
  const withDependencies = (file: DescFile): Answer => {
    const out: DescFile[] = [];
    const visit = (f: DescFile) => {
      if (out.includes(f)) return;
      out.push(f);
      for (const d of f.dependencies) visit(d);
    };
    visit(file);
    return {
      messageResponse: {
        case: "fileDescriptorResponse",
        value: { fileDescriptorProto: out.map((f) => toBinary(FileDescriptorProtoSchema, f.proto)) },
      },
    };
  };
  const notFound = (what: string): Answer => ({
    messageResponse: { case: "errorResponse", value: { errorCode: Code.NotFound, errorMessage: `${what} not found` } },
  });

  const answer = (req: ServerReflectionRequest): Answer => {
    const r = req.messageRequest;
    switch (r.case) {
      case "listServices":
        return { messageResponse: { case: "listServicesResponse", value: { service: serviceNames } } };
      case "fileByFilename": {
        const f = files.get(r.value);
        return f ? withDependencies(f) : notFound(`file ${r.value}`);
      }
      case "fileContainingSymbol": {
        const f = symbols.get(r.value.replace(/^\./, ""));
        return f ? withDependencies(f) : notFound(`symbol ${r.value}`);
      }
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = r.value;
        for (const f of files.values()) {
          const x = allExtensions(f).find((e) => e.extendee.typeName === containingType && e.number === extensionNumber);
          if (x) return withDependencies(f);
        }
        return notFound(`extension ${extensionNumber} of ${containingType}`);
      }
      case "allExtensionNumbersOfType": {
        if (!symbols.has(r.value)) return notFound(`type ${r.value}`);
        const numbers = [...files.values()]
          .flatMap(allExtensions)
          .filter((e) => e.extendee.typeName === r.value)
          .map((e) => e.number);
        return {
          messageResponse: { case: "allExtensionNumbersResponse", value: { baseTypeName: r.value, extensionNumber: numbers } },
        };
      }
      default:
        return {
          messageResponse: { case: "errorResponse", value: { errorCode: Code.InvalidArgument, errorMessage: "no request given" } },
        };
    }
  };

  return {
    async *serverReflectionInfo(requests: AsyncIterable<ServerReflectionRequest>) {
      for await (const req of requests) {
        yield { validHost: req.host, originalRequest: req, ...answer(req) };
      }
    },
  };
}

function allExtensions(f: DescFile) {
  const out = [...f.extensions];
  const visit = (m: DescMessage) => {
    out.push(...m.nestedExtensions);
    m.nestedMessages.forEach(visit);
  };
  f.messages.forEach(visit);
  return out;
}
