"""
protoclasses.py - message classes built from the project's own proto/
files for the tests that speak gRPC: protoc writes a descriptor set and
google.protobuf builds the classes from it (no generated code, no pip).
"""

import os
import subprocess

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")


def message_classes(directory, proto_files, names):
    """The classes of the fully qualified message @names, in that order,
    from @proto_files (paths under proto/; imports follow); protoc's
    output goes to @directory."""
    out = os.path.join(str(directory), "messages.pb")
    subprocess.run(["protoc", "--include_imports", "--descriptor_set_out=" + out,
                    "-I", PROTO_DIR, "-I", "/usr/include", *proto_files], check=True)
    with open(out, "rb") as f:
        fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:  # protoc writes them imports first
        pool.Add(fd)

    def cls(name):
        desc = pool.FindMessageTypeByName(name)
        if hasattr(message_factory, "GetMessageClass"):
            return message_factory.GetMessageClass(desc)
        return message_factory.MessageFactory(pool).GetPrototype(desc)

    return [cls(n) for n in names]
