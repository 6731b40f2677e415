"""Consume a topic through the gateway's gRPC API (skein.v1.Gateway/Consume).

Usage: grpc_consume.py --gateway HOST:PORT --token TOKEN --topic TOPIC
                       [--group GROUP] [--max N] [--credit N]

Prints one line per record: partition, offset, key and value (UTF-8 where they are).
With --group, partitions come from the group and offsets are committed after each batch;
without, every partition is read from the start. Stops after --max records (default: run
until interrupted). The Python stubs are generated from proto/ with grpcio-tools on start.
"""
import argparse
import importlib
import os
import queue
import sys
import tempfile

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.join(HERE, "..", "..", "proto")


def stubs():
    out = tempfile.mkdtemp(prefix="skein-grpc-")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    code = protoc.main([
        "protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out}",
        f"--grpc_python_out={out}", os.path.join(PROTO_ROOT, "skein", "v1", "gateway.proto"),
    ])
    if code != 0:
        raise SystemExit("could not compile proto/skein/v1/gateway.proto")
    sys.path.insert(0, out)
    return importlib.import_module("skein.v1.gateway_pb2"), importlib.import_module("skein.v1.gateway_pb2_grpc")


def text(data):
    if data is None:
        return "-"
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data.hex()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gateway", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group")
    parser.add_argument("--max", type=int, default=0)
    parser.add_argument("--credit", type=int, default=100)
    args = parser.parse_args()
    pb, rpc = stubs()

    subscribe = pb.Subscribe(topic=args.topic, credit=pb.Credit(records=args.credit))
    if args.group:
        subscribe.group.group_id = args.group
        subscribe.group.start = pb.START_FROM_EARLIEST
    else:
        subscribe.partitions.start = pb.START_FROM_EARLIEST
    outgoing = queue.Queue()
    outgoing.put(pb.ConsumeRequest(subscribe=subscribe))

    def requests():
        while True:
            message = outgoing.get()
            if message is None:
                return
            yield message

    channel = grpc.insecure_channel(args.gateway)
    stub = rpc.GatewayStub(channel)
    responses = stub.Consume(requests(), metadata=[("authorization", f"Bearer {args.token}")])
    seen = 0
    generation = 0
    try:
        for response in responses:
            kind = response.WhichOneof("kind")
            if kind == "assignment":
                generation = response.assignment.generation
                print(f"# assigned partitions {list(response.assignment.partitions)} "
                      f"(generation {generation})", flush=True)
            elif kind == "records":
                done = {}
                for record in response.records.records:
                    print(f"{record.partition}\t{record.offset}\t"
                          f"{text(record.key if record.HasField('key') else None)}\t"
                          f"{text(record.value if record.HasField('value') else None)}", flush=True)
                    done[record.partition] = record.offset + 1
                    seen += 1
                # Committing (or acknowledging) returns the credit for the next records.
                outgoing.put(pb.ConsumeRequest(commit=pb.Commit(
                    offsets=[pb.PartitionOffset(partition=p, offset=o) for p, o in done.items()],
                    generation=generation,
                    acknowledge_only=not args.group,
                )))
                if args.max and seen >= args.max:
                    break
    except grpc.RpcError as e:
        raise SystemExit(f"{e.code().name}: {e.details()}")
    finally:
        outgoing.put(None)
        channel.close()


if __name__ == "__main__":
    main()
