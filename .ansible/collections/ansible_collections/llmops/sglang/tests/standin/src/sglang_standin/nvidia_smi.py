"""`sglang-standin-nvidia-smi`: nvidia-smi's output formats (driver 580, see fixtures/nvidia-smi) for test hosts.

GPUs: $SGLANG_STANDIN_GPU (h200 | b300 | rtx_pro_6000, default h200) x $SGLANG_STANDIN_GPU_COUNT (default 8).
Memory in use comes from the stand-in's schedulers ($SGLANG_STANDIN_STATE_DIR/gpuN.json, written at each
load phase); a GPU whose scheduler process is gone shows 0 MiB and no process, like after a crash.
Supported: no arguments (the table), -L, --version, topo -m, --query-gpu=FIELDS, --query-compute-apps=FIELDS,
--query-remapped-rows=FIELDS and --query-retired-pages=FIELDS with --format=csv[,noheader][,nounits].
Health faults (README "nvidia-smi stand-in"): $SGLANG_STANDIN_SMI_FAULT and the file $SGLANG_STANDIN_SMI_FAULT_FILE
(default /etc/sglang-standin/nvidia-smi.faults), re-read at every call.
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
    # Health fields, headers and values as a real H200 prints them (fixtures/nvidia-smi/h200-full/query-gpu*.csv).
    "vbios_version": ("vbios_version", None), "persistence_mode": ("persistence_mode", None),
    "compute_mode": ("compute_mode", None), "pstate": ("pstate", None), "power.limit": ("power.limit [W]", "W"),
    "memory.reserved": ("memory.reserved [MiB]", "MiB"), "ecc.mode.current": ("ecc.mode.current", None),
    "ecc.errors.uncorrected.volatile.total": ("ecc.errors.uncorrected.volatile.total", None),
    "ecc.errors.corrected.volatile.total": ("ecc.errors.corrected.volatile.total", None),
    "ecc.errors.uncorrected.aggregate.total": ("ecc.errors.uncorrected.aggregate.total", None),
    "retired_pages.pending": ("retired_pages.pending", None), "remapped_rows.pending": ("remapped_rows.pending", None),
    "remapped_rows.failure": ("remapped_rows.failure", None),
    "remapped_rows.correctable": ("remapped_rows.correctable", None),
    "remapped_rows.uncorrectable": ("remapped_rows.uncorrectable", None),
    "clocks_event_reasons.active": ("clocks_event_reasons.active", None), "mig.mode.current": ("mig.mode.current", None),
    "fabric.state": ("fabric.state", None), "fabric.status": ("fabric.status", None),
}
REMAP_FIELDS = {"gpu_uuid": ("gpu_uuid", None), "gpu_bus_id": ("gpu_bus_id", None),
                "remapped_rows.correctable": ("remapped_rows.correctable", None),
                "remapped_rows.uncorrectable": ("remapped_rows.uncorrectable", None),
                "remapped_rows.pending": ("remapped_rows.pending", None),
                "remapped_rows.failure": ("remapped_rows.failure", None)}
RETIRED_FIELDS = {"gpu_uuid": ("gpu_uuid", None), "gpu_bus_id": ("gpu_bus_id", None),
                  "retired_pages.address": ("retired_pages.address", None),
                  "retired_pages.cause": ("retired_pages.cause", None)}
FAULT_FILE = "/etc/sglang-standin/nvidia-smi.faults"
VBIOS = {"h200": "96.00.A5.00.1A", "b300": "97.00.B5.00.2C", "rtx_pro_6000": "98.02.2E.00.05"}
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


def faults(environ=None):
    """Health faults from $SGLANG_STANDIN_SMI_FAULT and the fault file, items separated by commas/space/newlines:
    ecc@N[=COUNT], remap_pending@N, remap_failure@N, retired_pending@N, persistence_off[@N], process@N=PID[:MiB],
    gpus=N, cuda=X.Y, driver=VERSION, hang. Unknown items raise ValueError (a typo must not pass as healthy)."""
    environ = os.environ if environ is None else environ
    text = environ.get("SGLANG_STANDIN_SMI_FAULT", "")
    try:
        with open(environ.get("SGLANG_STANDIN_SMI_FAULT_FILE", FAULT_FILE)) as handle:
            text += "\n" + "\n".join(line.split("#", 1)[0] for line in handle)
    except OSError:
        pass
    spec = {"ecc": {}, "remap_pending": set(), "remap_failure": set(), "retired_pending": set(),
            "persistence_off": set(), "process": [], "gpus": None, "cuda": None, "driver": None, "hang": False}
    for item in text.replace(",", " ").replace(";", " ").split():
        key, _at, arg = item.partition("@")
        if "=" in key:
            key, value = key.split("=", 1)
            if key in ("gpus", "cuda", "driver"):
                spec[key] = int(value) if key == "gpus" else value
                continue
            raise ValueError("nvidia-smi stand-in: bad fault item %r" % item)
        target, _eq, value = arg.partition("=")
        if key == "hang" and not arg:
            spec["hang"] = True
        elif key == "persistence_off" and not arg:
            spec["persistence_off"].add("all")
        elif key == "ecc" and target.isdigit():
            spec["ecc"][int(target)] = int(value or "1")
        elif key in ("remap_pending", "remap_failure", "retired_pending", "persistence_off") and target.isdigit():
            spec[key].add(int(target))
        elif key == "process" and target.isdigit() and value:
            pid, _colon, mib = value.partition(":")
            spec["process"].append((int(target), int(pid), int(mib or "20000")))
        else:
            raise ValueError("nvidia-smi stand-in: bad fault item %r" % item)
    return spec


def process_name(pid):
    try:
        with open("/proc/%d/comm" % pid) as handle:
            return handle.read().strip()
    except OSError:
        return "python3"


def gpus(environ=None, spec=None):
    environ = os.environ if environ is None else environ
    spec = faults(environ) if spec is None else spec
    kind = environ.get("SGLANG_STANDIN_GPU", "h200")
    total_mib, pcie, name = GPUS[kind][1:]
    state_dir = environ.get("SGLANG_STANDIN_STATE_DIR")
    result = []
    count = spec["gpus"] if spec["gpus"] is not None else int(environ.get("SGLANG_STANDIN_GPU_COUNT", "8"))
    for index in range(count):
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
            "utilization.gpu": 0, "compute_cap": COMPUTE_CAP[kind],
            "temperature.gpu": 45 if pid else 34, "power.draw": "%.2f" % (POWER_CAP[kind] * (0.4 if pid else 0.12)),
            "pid": pid, "kind": kind, "pcie": pcie, "apps": [(pid, "python3", max(0, used - 9))] if pid else [],
            "driver_version": spec["driver"] or DRIVER, "vbios_version": VBIOS[kind],
            "persistence_mode": "Disabled" if {"all", index} & spec["persistence_off"] else "Enabled",
            "compute_mode": "Default", "pstate": "P0", "power.limit": "%.2f" % POWER_CAP[kind], "memory.reserved": 616,
            "ecc.mode.current": "Enabled", "ecc.errors.uncorrected.volatile.total": spec["ecc"].get(index, 0),
            "ecc.errors.corrected.volatile.total": 0, "ecc.errors.uncorrected.aggregate.total": spec["ecc"].get(index, 0),
            # Hopper and later retire no pages (they remap rows): [N/A] unless a fault says a page is pending.
            "retired_pages.pending": "Yes" if index in spec["retired_pending"] else "[N/A]",
            "remapped_rows.pending": "Yes" if index in spec["remap_pending"] else "No",
            "remapped_rows.failure": "Yes" if index in spec["remap_failure"] else "No",
            "remapped_rows.correctable": 0, "remapped_rows.uncorrectable": 1 if index in spec["remap_pending"] else 0,
            "clocks_event_reasons.active": "0x0000000000000000" if pid else "0x0000000000000001",
            "mig.mode.current": "Disabled", "fabric.state": "N/A", "fabric.status": "N/A"})
        dev = result[-1]
        for gpu_index, foreign_pid, mib in spec["process"]:
            if gpu_index == index and alive(foreign_pid):
                dev["apps"].append((foreign_pid, process_name(foreign_pid), mib))
                dev["memory.used"] = min(total_mib, dev["memory.used"] + mib + 9)
                dev["memory.free"] = total_mib - dev["memory.used"]
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
    table = {"gpu": GPU_FIELDS, "apps": APP_FIELDS, "remap": REMAP_FIELDS, "retired": RETIRED_FIELDS}[kind]
    unknown = [field for field in fields if field not in table]
    if unknown:
        return 'Field "%s" is not a valid field to query.' % unknown[0], 2
    options = set(format_arg.split(",")) if format_arg else set()
    if "csv" not in options:
        return "--format must be given with csv", 2
    devices = gpus(environ)
    if kind == "gpu":
        return csv(devices, fields, table, options), 0
    if kind == "remap":
        rows = [dict(dev, gpu_uuid=dev["uuid"], gpu_bus_id=dev["pci.bus_id"]) for dev in devices]
        return csv(rows, fields, table, options), 0
    if kind == "retired":
        # real H200: one [N/A] row per cause when no page was retired (fixtures h200-full/topo-etc.txt)
        rows = [{"gpu_uuid": dev["uuid"], "gpu_bus_id": dev["pci.bus_id"], "retired_pages.cause": cause,
                 "retired_pages.address": "0x00000000deadb000" if dev["retired_pages.pending"] == "Yes" else "[N/A]"}
                for dev in devices for cause in ("Single Bit ECC", "Double Bit ECC")]
        return csv(rows, fields, table, options), 0
    apps = [{"pid": pid, "process_name": pname, "used_memory": mib, "used_gpu_memory": mib, "gpu_uuid": dev["uuid"],
             "gpu_bus_id": dev["pci.bus_id"]} for dev in devices for pid, pname, mib in dev["apps"]]
    return csv(apps, fields, table, options | {"noheader"} if not apps else options), 0


def render_table(environ):
    spec = faults(environ)
    devices = gpus(environ, spec)
    driver, cuda = spec["driver"] or DRIVER, spec["cuda"] or CUDA
    out = [time.strftime("%a %b %d %H:%M:%S %Y       "),
           "+-----------------------------------------------------------------------------------------+",
           "| NVIDIA-SMI %s             Driver Version: %s     CUDA Version: %-4s     |" % (driver, driver, cuda),
           "+-----------------------------------------+------------------------+----------------------+",
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|=========================================+========================+======================|"]
    for dev in devices:
        short = dev["name"].replace("NVIDIA ", "NVIDIA ")[:24]
        out.append("| %3d  %-24s      %3s  |   %s Off |%21d |" % (
            dev["index"], short, "On" if dev["persistence_mode"] == "Enabled" else "Off", dev["pci.bus_id"],
            dev["ecc.errors.uncorrected.volatile.total"]))
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
    busy = [(dev, app) for dev in devices for app in dev["apps"]]
    if not busy:
        out.append("|  No running processes found                                                             |")
    for dev, (pid, pname, mib) in busy:
        usage = "%dMiB" % mib
        out.append("| %4d   N/A  N/A  %14d      C   %-s%s |" % (dev["index"], pid, pname, usage.rjust(46 - len(pname))))
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


def version(environ):
    spec = faults(environ)
    driver = spec["driver"] or DRIVER
    return "\n".join(["NVIDIA-SMI version  : %s" % driver, "NVML version        : %s" % driver.rsplit(".", 1)[0],
                      "DRIVER version      : %s" % driver, "CUDA Version        : %s" % (spec["cuda"] or CUDA)])


def run(argv, environ=None):
    environ = os.environ if environ is None else environ
    try:
        spec = faults(environ)
    except ValueError as exc:
        return str(exc), 2
    if spec["hang"]:
        time.sleep(3600)  # a GPU in a bad state: nvidia-smi blocks in the driver
    options = {}
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            options[key] = value
    if not argv:
        return render_table(environ), 0
    if argv == ["--version"]:
        return version(environ), 0
    if argv == ["-L"]:
        return "\n".join("GPU %d: %s (UUID: %s)" % (dev["index"], dev["name"], dev["uuid"]) for dev in gpus(environ)), 0
    if argv[:2] == ["topo", "-m"]:
        return topo(environ), 0
    if "--query-gpu" in options:
        return query("gpu", options["--query-gpu"], options.get("--format"), environ)
    if "--query-compute-apps" in options:
        return query("apps", options["--query-compute-apps"], options.get("--format"), environ)
    if "--query-remapped-rows" in options:
        return query("remap", options["--query-remapped-rows"], options.get("--format"), environ)
    if "--query-retired-pages" in options:
        return query("retired", options["--query-retired-pages"], options.get("--format"), environ)
    return "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.", 2


def main(argv=None):
    text, code = run(sys.argv[1:] if argv is None else argv)
    if text:
        sys.stdout.write(text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
