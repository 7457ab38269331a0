#!/usr/bin/env python3
"""A machine provider for trellis in Python, over the gRPC driver protocol.

Its "VMs" are records in a JSON file: enough to show the whole driver
contract from another language, and to run trellis's driver conformance kit
against it (crates/driver-grpc/tests/conformance_python.rs). It serves
MachineClasses whose `provider` is `jsonfile` (--provider), and reads the
cluster a class's VMs belong to from `providerSpec.cluster`.

How it talks to the machine-controller-manager (see
crates/driver-grpc/proto/trellis/driver/v1/driver.proto): it connects to the
MCM's endpoint, opens `Register`, names the providers it serves, and answers
each operation that arrives on that stream. Operations name the class and
secret by reference; it fetches them with GetMachineClass and GetSecret and
caches them by resourceVersion. When the connection drops it reconnects and
registers again; the MCM retries what was in flight, and every call here is
idempotent, so nothing is created twice.

Stubs are generated at start from the repository's .proto with grpcio-tools
(into --stubs-dir, a temporary directory by default), so no generated code
is kept in the repository.

Faults (for the conformance kit): with --faults FILE, every call first reads
FILE, a JSON object {"CreateMachine": {"code": 14, "times": 2}, ...}; while a
call's `times` is above zero it fails with that code and counts it down.

    pip install grpcio grpcio-tools
    python3 examples/grpc-provider-python/provider.py \\
        --mcm-endpoint 127.0.0.1:5000 --state /tmp/vms.json
"""

import argparse
import json
import logging
import os
import queue
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc  # grpcio

LOG = logging.getLogger("jsonfile-provider")

# Machine error codes: gRPC's status codes plus 17 (see crates/driver).
OK, INVALID_ARGUMENT, NOT_FOUND, INTERNAL, UNIMPLEMENTED, UNINITIALIZED = 0, 3, 5, 13, 12, 17

# The CSI driver whose volumes this provider claims in GetVolumeIDs.
CSI_DRIVER = "jsonfile.csi.trellis.dev"

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_PROTO_DIR = os.path.join(REPO, "crates", "driver-grpc", "proto")
PROTO = "trellis/driver/v1/driver.proto"


def generate_stubs(proto_dir, out_dir):
    """Compiles the protocol into Python modules and imports them."""
    from grpc_tools import protoc  # grpcio-tools

    # protoc needs the well-known types' include path even though the
    # protocol uses none; grpc_tools ships them.
    import grpc_tools

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    os.makedirs(out_dir, exist_ok=True)
    rc = protoc.main(
        [
            "protoc",
            "-I" + proto_dir,
            "-I" + well_known,
            "--python_out=" + out_dir,
            "--grpc_python_out=" + out_dir,
            os.path.join(proto_dir, PROTO),
        ]
    )
    if rc != 0:
        raise SystemExit(f"generating the stubs from {proto_dir}/{PROTO} failed ({rc})")
    sys.path.insert(0, out_dir)
    from trellis.driver.v1 import driver_pb2, driver_pb2_grpc

    return driver_pb2, driver_pb2_grpc


class DriverError(Exception):
    """A call's failure: a machine error code and a message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class Faults:
    """Armed failures, read from a JSON file the test harness writes."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def check(self, call):
        if not self.path:
            return
        with self.lock:
            try:
                with open(self.path) as f:
                    armed = json.load(f)
            except (FileNotFoundError, json.JSONDecodeError):
                return
            entry = armed.get(call)
            if not entry or entry.get("times", 0) <= 0:
                return
            entry["times"] -= 1
            if entry["times"] <= 0:
                del armed[call]
            write_atomically(self.path, armed)
            code = entry["code"]
        raise DriverError(code, f"failpoint: {call} fails with code {code}")


def write_atomically(path, value):
    """Writes JSON so that a reader sees the old file or the new, never half."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class JsonFileDriver:
    """The driver contract over a JSON file of VM records.

    Every method takes the decoded machine (a dict), class (a dict) and
    secret (a dict of bytes), and returns a dict of the response's fields or
    raises DriverError. The file is the provider's whole state: it is
    written before a call answers, so a killed provider forgets nothing it
    acknowledged.
    """

    def __init__(self, state_path, faults, provider_name):
        self.state_path = state_path
        self.faults = faults
        self.provider_name = provider_name
        self.lock = threading.Lock()
        if not os.path.exists(state_path):
            write_atomically(state_path, {"serial": 0, "vms": {}})

    def _load(self):
        with open(self.state_path) as f:
            return json.load(f)

    @staticmethod
    def _cluster(machine_class):
        cluster = (machine_class.get("providerSpec") or {}).get("cluster")
        if not isinstance(cluster, str) or not cluster:
            raise DriverError(INVALID_ARGUMENT, "providerSpec.cluster is missing")
        return cluster

    @staticmethod
    def _name(machine):
        name = (machine.get("metadata") or {}).get("name")
        if not name:
            raise DriverError(INVALID_ARGUMENT, "the machine has no name")
        return name

    @staticmethod
    def _find(state, cluster, machine):
        """The providerID of the machine's VM in the cluster, or None."""
        pid = (machine.get("spec") or {}).get("providerID") or ""
        if pid:
            vm = state["vms"].get(pid)
            return pid if vm and vm["cluster"] == cluster else None
        name = (machine.get("metadata") or {}).get("name")
        for pid, vm in state["vms"].items():
            if vm["cluster"] == cluster and vm["machine"] == name:
                return pid
        return None

    def _found(self, state, cluster, machine):
        pid = self._find(state, cluster, machine)
        if pid is None:
            name = (machine.get("metadata") or {}).get("name")
            raise DriverError(NOT_FOUND, f"no VM backs machine {name!r} in cluster {cluster!r}")
        return pid

    def create_machine(self, machine, machine_class, secret):
        self.faults.check("CreateMachine")
        cluster, name = self._cluster(machine_class), self._name(machine)
        with self.lock:
            state = self._load()
            pid = self._find(state, cluster, machine)
            if pid is None:
                state["serial"] += 1
                pid = f"jsonfile:///{cluster}/{name}-{state['serial']}"
                state["vms"][pid] = {
                    "machine": name,
                    "cluster": cluster,
                    "class": (machine_class.get("metadata") or {}).get("name", ""),
                    "initialized": False,
                    "tags": (machine_class.get("providerSpec") or {}).get("tags", {}),
                    "userDataBytes": len(secret.get("userData", b"")),
                }
                write_atomically(self.state_path, state)
            vm = state["vms"][pid]
        return {"provider_id": pid, "node_name": vm["machine"]}

    def initialize_machine(self, machine, machine_class, secret):
        self.faults.check("InitializeMachine")
        cluster = self._cluster(machine_class)
        with self.lock:
            state = self._load()
            pid = self._found(state, cluster, machine)
            vm = state["vms"][pid]
            if not vm["initialized"]:
                vm["initialized"] = True
                write_atomically(self.state_path, state)
        return {"provider_id": pid, "node_name": vm["machine"]}

    def delete_machine(self, machine, machine_class, secret):
        self.faults.check("DeleteMachine")
        cluster = self._cluster(machine_class)
        with self.lock:
            state = self._load()
            pid = self._find(state, cluster, machine)
            if pid is not None:
                del state["vms"][pid]
                write_atomically(self.state_path, state)
        return {}

    def get_machine_status(self, machine, machine_class, secret):
        self.faults.check("GetMachineStatus")
        cluster = self._cluster(machine_class)
        with self.lock:
            state = self._load()
            pid = self._found(state, cluster, machine)
            vm = state["vms"][pid]
        if not vm["initialized"]:
            raise DriverError(UNINITIALIZED, f"VM {pid} exists but is not initialized")
        return {"provider_id": pid, "node_name": vm["machine"]}

    def list_machines(self, machine_class, secret):
        self.faults.check("ListMachines")
        cluster = self._cluster(machine_class)
        with self.lock:
            state = self._load()
        return {
            "machine_list": {
                pid: vm["machine"] for pid, vm in state["vms"].items() if vm["cluster"] == cluster
            }
        }

    def get_volume_ids(self, pv_specs):
        self.faults.check("GetVolumeIDs")
        ids = [
            s["csi"]["volumeHandle"]
            for s in pv_specs
            if (s.get("csi") or {}).get("driver") == CSI_DRIVER
        ]
        return {"volume_ids": ids}

    def generate_machine_class_for_migration(self, provider_specific, machine_class, class_spec):
        self.faults.check("GenerateMachineClassForMigration")
        raise DriverError(
            UNIMPLEMENTED, "the jsonfile provider does not implement GenerateMachineClassForMigration"
        )

    def update_machine(self, machine, machine_class, secret, last_applied):
        self.faults.check("UpdateMachine")
        cluster = self._cluster(machine_class)
        with self.lock:
            state = self._load()
            pid = self._found(state, cluster, machine)
            tags = (machine_class.get("providerSpec") or {}).get("tags", {})
            if state["vms"][pid].get("tags") != tags:
                state["vms"][pid]["tags"] = tags
                write_atomically(self.state_path, state)
        return {}


class Session:
    """One Register stream: answers operations until the stream ends."""

    def __init__(self, pb, stub, driver, providers, instance):
        self.pb, self.stub, self.driver = pb, stub, driver
        self.providers, self.instance = providers, instance
        self.outbound = queue.Queue()
        self.session_id = None
        self.classes = {}  # (namespace, name, resourceVersion) -> dict
        self.secrets = {}  # (namespace, name, resourceVersion) -> dict of bytes
        self.cache_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=16)

    def requests(self):
        yield self.pb.DriverSide(
            registration=self.pb.Registration(
                providers=self.providers, instance=self.instance
            )
        )
        while True:
            item = self.outbound.get()
            if item is None:
                return
            yield item

    def run(self):
        try:
            for message in self.stub.Register(self.requests()):
                kind = message.WhichOneof("message")
                if kind == "registered":
                    self.session_id = message.registered.session
                    LOG.info("registered as %s", ", ".join(self.providers))
                elif kind == "operation":
                    self.pool.submit(self.answer, message.operation)
        except grpc.RpcError as e:
            LOG.warning("the session ended: %s %s", e.code(), e.details())
        finally:
            self.outbound.put(None)
            self.pool.shutdown(wait=False)

    def _metadata(self):
        return (("trellis-session", self.session_id),)

    def _class(self, meta):
        key = (meta.namespace, meta.name, meta.resource_version)
        with self.cache_lock:
            if key in self.classes:
                return self.classes[key]
        reply = self.stub.GetMachineClass(meta, metadata=self._metadata(), timeout=30)
        value = json.loads(reply.object)
        with self.cache_lock:
            self.classes[key] = value
        return value

    def _secret(self, meta, user_data):
        key = (meta.namespace, meta.name, meta.resource_version)
        with self.cache_lock:
            data = self.secrets.get(key)
        if data is None:
            reply = self.stub.GetSecret(meta, metadata=self._metadata(), timeout=30)
            data = dict(reply.data)
            with self.cache_lock:
                self.secrets[key] = data
        data = dict(data)
        if user_data is not None:
            data["userData"] = user_data
        return data

    def _machine_args(self, call):
        machine = json.loads(call.machine)
        machine_class = self._class(call.machine_class)
        user_data = call.user_data if call.HasField("user_data") else None
        return machine, machine_class, self._secret(call.secret, user_data)

    def _run(self, op):
        pb, d = self.pb, self.driver
        which = op.WhichOneof("call")
        body = getattr(op, which) if which else None
        if which in ("create_machine", "initialize_machine", "get_machine_status"):
            reply = getattr(d, which)(*self._machine_args(body))
            addresses = [pb.NodeAddress(type="Hostname", address=reply["node_name"])]
            cls = {
                "create_machine": pb.CreateMachineResponse,
                "initialize_machine": pb.InitializeMachineResponse,
                "get_machine_status": pb.GetMachineStatusResponse,
            }[which]
            return which, cls(addresses=addresses, **reply)
        if which == "delete_machine":
            return which, pb.DeleteMachineResponse(**d.delete_machine(*self._machine_args(body)))
        if which == "list_machines":
            machine_class = self._class(body.machine_class)
            secret = self._secret(body.secret, None)
            return which, pb.ListMachinesResponse(**d.list_machines(machine_class, secret))
        if which == "get_volume_ids":
            specs = [json.loads(s) for s in body.pv_specs]
            return which, pb.GetVolumeIDsResponse(**d.get_volume_ids(specs))
        if which == "generate_machine_class_for_migration":
            generated = d.generate_machine_class_for_migration(
                json.loads(body.provider_specific_machine_class),
                json.loads(body.machine_class),
                body.class_spec,
            )
            return which, pb.GenerateMachineClassForMigrationResponse(
                machine_class=json.dumps(generated).encode()
            )
        if which == "update_machine":
            last = (
                json.loads(body.last_applied_provider_spec)
                if body.HasField("last_applied_provider_spec")
                else None
            )
            d.update_machine(*self._machine_args(body.machine), last)
            return which, pb.UpdateMachineResponse()
        raise DriverError(INVALID_ARGUMENT, f"unknown operation {which!r}")

    def answer(self, op):
        pb = self.pb
        try:
            field, reply = self._run(op)
            result = pb.OperationResult(id=op.id, **{field: reply})
        except DriverError as e:
            result = pb.OperationResult(id=op.id, error=pb.Status(code=e.code, message=e.message))
        except Exception as e:  # a bug here must not end the session
            LOG.exception("operation %d failed", op.id)
            result = pb.OperationResult(
                id=op.id, error=pb.Status(code=INTERNAL, message=f"the provider failed: {e!r}")
            )
        self.outbound.put(pb.DriverSide(result=result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mcm-endpoint", required=True, help="HOST:PORT of the MCM's driver endpoint")
    parser.add_argument("--state", required=True, help="JSON file holding the VMs")
    parser.add_argument("--faults", help="JSON file of armed failures (tests)")
    parser.add_argument("--provider", action="append", help="MachineClass provider served (repeatable); default jsonfile")
    parser.add_argument("--proto-dir", default=DEFAULT_PROTO_DIR)
    parser.add_argument("--stubs-dir", help="where to generate the stubs (default: a temporary directory)")
    parser.add_argument("--instance", default=f"{os.uname().nodename}/{os.getpid()}")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    stubs = args.stubs_dir or tempfile.mkdtemp(prefix="trellis-stubs-")
    pb, pb_grpc = generate_stubs(args.proto_dir, stubs)
    providers = args.provider or ["jsonfile"]
    driver = JsonFileDriver(args.state, Faults(args.faults), providers[0])

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    backoff = 0.1
    while not stopping.is_set():
        channel = grpc.insecure_channel(args.mcm_endpoint)
        stub = pb_grpc.MachineDriverStub(channel)
        session = Session(pb, stub, driver, providers, args.instance)
        runner = threading.Thread(target=session.run, daemon=True)
        runner.start()
        while runner.is_alive() and not stopping.is_set():
            runner.join(0.2)
        channel.close()
        if stopping.is_set():
            break
        if session.session_id is not None:
            backoff = 0.1
        LOG.warning("disconnected from %s; reconnecting in %.1fs", args.mcm_endpoint, backoff)
        time.sleep(backoff)
        backoff = min(backoff * 2, 5.0)
    LOG.info("stopped")


if __name__ == "__main__":
    main()
