"""`sglang-standin-nvidia-smi`: nvidia-smi's output formats (driver 580, see fixtures/nvidia-smi) for test hosts.

GPUs: $SGLANG_STANDIN_GPU (h200 | b300 | rtx_pro_6000, default h200) x $SGLANG_STANDIN_GPU_COUNT (default 8).
Memory in use comes from the stand-in's schedulers ($SGLANG_STANDIN_STATE_DIR/gpuN.json, written at each
load phase); a GPU whose scheduler process is gone shows 0 MiB and no process, like after a crash.
Supported: no arguments (the table), -L, topo -m, --query-gpu=FIELDS and --query-compute-apps=FIELDS with
--format=csv[,noheader][,nounits].
"""
import json
import os
import sys
import time
import uuid

from sglang_standin.scheduler import GPUS

DRIVER = "580.159.04"
CUDA = "13.0"
COMPUTE_CAP = {"h200": "9.0", "b300": "10.3", "rtx_pro_6000": "12.0"}
POWER_CAP = {"h200": 700, "b300": 1100, "rtx_pro_6000": 600}
# field -> (header, unit or None)
GPU_FIELDS = {
    "index": ("index", None), "name": ("name", None), "uuid": ("uuid", None), "pci.bus_id": ("pci.bus_id", None),
    "memory.used": ("memory.used [MiB]", "MiB"), "memory.total": ("memory.total [MiB]", "MiB"),
    "memory.free": ("memory.free [MiB]", "MiB"), "utilization.gpu": ("utilization.gpu [%]", "%"),
    "compute_cap": ("compute_cap", None), "driver_version": ("driver_version", None),
    "temperature.gpu": ("temperature.gpu", None), "power.draw": ("power.draw [W]", "W"),
}
APP_FIELDS = {"pid": ("pid", None), "process_name": ("process_name", None),
              "used_memory": ("used_gpu_memory [MiB]", "MiB"), "used_gpu_memory": ("used_gpu_memory [MiB]", "MiB"),
              "gpu_uuid": ("gpu_uuid", None), "gpu_bus_id": ("gpu_bus_id", None)}


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def gpus(environ=None):
    environ = os.environ if environ is None else environ
    kind = environ.get("SGLANG_STANDIN_GPU", "h200")
    total_mib, pcie, name = GPUS[kind][1:]
    state_dir = environ.get("SGLANG_STANDIN_STATE_DIR")
    result = []
    for index in range(int(environ.get("SGLANG_STANDIN_GPU_COUNT", "8"))):
        used, pid = 0, None
        if state_dir and os.path.exists(os.path.join(state_dir, "gpu%d.json" % index)):
            try:
                with open(os.path.join(state_dir, "gpu%d.json" % index)) as handle:
                    state = json.load(handle)
                if alive(state["pid"]):
                    used, pid = min(state["used_mib"], total_mib), state["pid"]
            except (OSError, ValueError, KeyError):
                pass
        result.append({
            "index": index, "name": name, "uuid": "GPU-%s" % uuid.uuid5(uuid.NAMESPACE_OID, "%s-%d" % (kind, index)),
            "pci.bus_id": "00000000:%02X:00.0" % (0x18 + 0x10 * index) if pcie else "00000000:00:%02X.0" % (6 + index),
            "memory.used": used, "memory.total": total_mib, "memory.free": total_mib - used,
            "utilization.gpu": 0, "compute_cap": COMPUTE_CAP[kind], "driver_version": DRIVER,
            "temperature.gpu": 45 if pid else 34, "power.draw": "%.2f" % (POWER_CAP[kind] * (0.4 if pid else 0.12)),
            "pid": pid, "kind": kind, "pcie": pcie})
    return result


def csv(rows, fields, table, options):
    lines = []
    if "noheader" not in options:
        lines.append(", ".join(table[field][0] for field in fields))
    for row in rows:
        values = []
        for field in fields:
            value = str(row[field])
            unit = table[field][1]
            if unit and "nounits" not in options:
                value += " " + unit if unit != "%" else " %"
            values.append(value)
        lines.append(", ".join(values))
    return "\n".join(lines)


def query(kind, fields_arg, format_arg, environ):
    fields = [field.strip() for field in fields_arg.split(",") if field.strip()]
    table = GPU_FIELDS if kind == "gpu" else APP_FIELDS
    unknown = [field for field in fields if field not in table]
    if unknown:
        return 'Field "%s" is not a valid field to query.' % unknown[0], 2
    options = set(format_arg.split(",")) if format_arg else set()
    if "csv" not in options:
        return "--format must be given with csv", 2
    devices = gpus(environ)
    if kind == "gpu":
        return csv(devices, fields, table, options), 0
    apps = [{"pid": dev["pid"], "process_name": "python3", "used_memory": max(0, dev["memory.used"] - 9),
             "used_gpu_memory": max(0, dev["memory.used"] - 9), "gpu_uuid": dev["uuid"], "gpu_bus_id": dev["pci.bus_id"]}
            for dev in devices if dev["pid"]]
    return csv(apps, fields, table, options | {"noheader"} if not apps else options), 0


def render_table(environ):
    devices = gpus(environ)
    out = [time.strftime("%a %b %d %H:%M:%S %Y       "),
           "+-----------------------------------------------------------------------------------------+",
           "| NVIDIA-SMI %s             Driver Version: %s     CUDA Version: %s     |" % (DRIVER, DRIVER, CUDA),
           "+-----------------------------------------+------------------------+----------------------+",
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|=========================================+========================+======================|"]
    for dev in devices:
        short = dev["name"].replace("NVIDIA ", "NVIDIA ")[:24]
        out.append("| %3d  %-24s       On  |   %s Off |                    0 |" % (dev["index"], short, dev["pci.bus_id"]))
        power = "%dW / %4dW" % (float(dev["power.draw"]), POWER_CAP[dev["kind"]])
        memory = "%dMiB / %dMiB" % (dev["memory.used"], dev["memory.total"])
        out.append("| N/A   %2dC    P0%24s | %22s |%7s%%      Default |"
                   % (dev["temperature.gpu"], power, memory, dev["utilization.gpu"]))
        out.append("|                                         |                        |             Disabled |")
        out.append("+-----------------------------------------+------------------------+----------------------+")
    out += ["", "+-----------------------------------------------------------------------------------------+",
            "| Processes:                                                                              |",
            "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
            "|        ID   ID                                                               Usage      |",
            "|=========================================================================================|"]
    busy = [dev for dev in devices if dev["pid"]]
    if not busy:
        out.append("|  No running processes found                                                             |")
    for dev in busy:
        usage = "%dMiB" % max(0, dev["memory.used"] - 9)
        out.append("| %4d   N/A  N/A  %14d      C   %-s%s |" % (dev["index"], dev["pid"], "python3", usage.rjust(46 - len("python3"))))
    out.append("+-----------------------------------------------------------------------------------------+")
    return "\n".join(out)


def topo(environ):
    devices = gpus(environ)
    names = ["GPU%d" % dev["index"] for dev in devices]
    out = ["\t\x1b[4m" + "\t".join(names + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\x1b[0m"]
    half = max(1, len(devices) // 2)
    for dev in devices:
        cells = []
        for other in devices:
            if other is dev:
                cells.append(" X ")
            elif dev["pcie"]:
                cells.append("NODE" if (dev["index"] < half) == (other["index"] < half) else "SYS")
            else:
                cells.append("NV18")
        numa = 0 if dev["index"] < half or not dev["pcie"] else 1
        out.append("\t".join(["GPU%d" % dev["index"]] + cells + ["0-31" if numa == 0 else "32-63", str(numa), "", "N/A"]))
    out += ["", "Legend:", "",
            "  X    = Self",
            "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
            "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
            "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
            "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
            "  PIX  = Connection traversing at most a single PCIe bridge",
            "  NV#  = Connection traversing a bonded set of # NVLinks"]
    return "\n".join(out)


def run(argv, environ=None):
    environ = os.environ if environ is None else environ
    options = {}
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            options[key] = value
    if not argv:
        return render_table(environ), 0
    if argv == ["-L"]:
        return "\n".join("GPU %d: %s (UUID: %s)" % (dev["index"], dev["name"], dev["uuid"]) for dev in gpus(environ)), 0
    if argv[:2] == ["topo", "-m"]:
        return topo(environ), 0
    if "--query-gpu" in options:
        return query("gpu", options["--query-gpu"], options.get("--format"), environ)
    if "--query-compute-apps" in options:
        return query("apps", options["--query-compute-apps"], options.get("--format"), environ)
    return "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2


def main(argv=None):
    text, code = run(sys.argv[1:] if argv is None else argv)
    if text:
        sys.stdout.write(text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
