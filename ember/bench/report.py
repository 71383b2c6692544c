"""Turns measurements into ratios, a JSON-ready summary and the printed table.

Two kinds of ratio, both defined here and nowhere else:
- speed ratio = peer time / Ember time: above 1 means Ember is faster;
- floor ratio = time / floor time, where the floor time is what the machine's limit
  allows for this workload's work: the copy floor scaled to the bytes it must move, or
  its matmul flops at the measured FMA peak (the best SGEMM rate where the peak could
  not be measured). For matmul-bound workloads the table shows the inverse, the
  fraction of that rate reached, as the targets state it.

The floors are the CPU's on a CPU run and the card's on a GPU run (the same entries:
the copy floor is then a device-to-device copy, the SGEMM rate cuBLAS's in float32, with
its bfloat16 rate beside it); a floor that could not be measured has no "ok" status and
bounds nothing.
"""
from __future__ import annotations

from ember.bench.floors import FMA_PEAK, sgemm_rate

UNIT_SCALE = {"ms": 1e3, "us": 1e6}
REASON_WIDTH = 30


def speed_ratio(peer_s: float | None, ember_s: float | None) -> float | None:
    if peer_s is None or ember_s is None:
        return None
    return peer_s / ember_s


def copy_floor_s(copy: dict, work_bytes: float) -> float:
    """Time the measured copy bandwidth needs to move ``work_bytes`` (reads + writes)."""
    return copy["median_s"] * work_bytes / copy["traffic_bytes"]


def sgemm_floor_s(flops: float, gflops: float) -> float:
    return flops / (gflops * 1e9)


def _measured(floors: dict, kind: str) -> dict | None:
    entry = floors.get(kind)
    return entry if entry is not None and entry["status"] == "ok" else None


def _floor(kind: str | None, work: float | None, floors: dict, by_framework: dict) -> dict | None:
    """The floor time of one workload and every framework's time relative to it."""
    if kind is None or work is None:
        return None
    entry: dict = {"kind": kind, "work": work}
    copy, sgemm = _measured(floors, "copy"), _measured(floors, "sgemm")
    if kind == "copy" and copy:
        entry["floor_s"] = copy_floor_s(copy, work)
    elif kind == "sgemm" and sgemm and sgemm_rate(sgemm):
        entry["blas"], entry["gflops"] = sgemm_rate(sgemm)
        entry["floor_s"] = sgemm_floor_s(work, entry["gflops"])
    else:
        return entry
    entry["time_over_floor"] = {
        fw: m["median_s"] / entry["floor_s"]
        for fw, m in by_framework.items() if m["median_s"] is not None
    }
    return entry


def build(machine: dict, settings: dict, frameworks: list[str], floors: dict,
          workloads: list, results: dict, floor_work: dict) -> dict:
    """The whole run as plain data: what ``--json`` writes and ``run_bench`` returns."""
    summary_workloads = {}
    for workload in workloads:
        by_framework = results[workload.name]
        ember_s = by_framework.get("ember", {}).get("median_s")
        summary_workloads[workload.name] = {
            "description": workload.describe(settings["sizes"]),
            "unit": workload.unit,
            "frameworks": by_framework,
            "ratios": {fw: speed_ratio(m["median_s"], ember_s)
                       for fw, m in by_framework.items() if fw != "ember"},
            "floor": _floor(workload.floor, floor_work.get(workload.name), floors, by_framework),
        }
    return {"machine": machine, "settings": settings, "frameworks": frameworks,
            "floors": floors, "workloads": summary_workloads}


# --- the table ---------------------------------------------------------------------------

def format_time(seconds: float, unit: str) -> str:
    value = seconds * UNIT_SCALE[unit]
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if value < 0.1 else f"{value:.2f}"


def short_cell(measurement: dict | None, unit: str) -> str:
    """A framework's cell without a ratio: its time, or what happened instead."""
    if measurement is None:
        return "n/a"
    if measurement["status"] == "ok":
        return format_time(measurement["median_s"], unit)
    return {"wrong": "WRONG", "error": "ERROR", "n/a": "n/a"}[measurement["status"]]


def _ember_cell(measurement: dict | None, unit: str) -> str:
    cell = short_cell(measurement, unit)
    if cell == "ERROR":
        reason = measurement["reason"] or ""
        if len(reason) > REASON_WIDTH:
            reason = reason[:REASON_WIDTH - 3] + "..."
        cell = f"ERROR: {reason}"
    return cell


def _peer_cell(measurement: dict | None, unit: str, ratio: float | None) -> str:
    cell = short_cell(measurement, unit)
    return f"{cell} ({ratio:.2f}x)" if ratio is not None else cell


def _floor_cell(entry: dict) -> str:
    floor = entry["floor"]
    ember_ratio = (floor or {}).get("time_over_floor", {}).get("ember")
    if ember_ratio is None:
        return "n/a" if floor else ""
    if floor["kind"] == "sgemm":
        return f"{1 / ember_ratio:.0%} of {'FMA peak' if floor['blas'] == FMA_PEAK else 'SGEMM'}"
    return f"{ember_ratio:.2f}x copy"


def _rate(entry: dict) -> str:
    return f"{entry['gflops']:.0f} GFLOP/s" if entry["status"] == "ok" else entry["status"]


def _bf16_rates(bf16: dict) -> str:
    """One bfloat16 GEMM's rate (a GPU's), or each one's by name (the CPU's)."""
    if "status" in bf16:
        return _rate(bf16)
    return ", ".join(f"{name} {_rate(entry)}" for name, entry in bf16.items())


def floor_line(kind: str, floor: dict) -> str:
    """One floor in one line: what was measured and how fast, or why it was not."""
    if floor["status"] != "ok":
        status = "n/a" if floor["status"] == "n/a" else floor["status"].upper()
        return f"{kind} floor {status}: {floor['reason']}"
    if "bytes" in floor:  # the copy
        return (f"{floor['what']} of {floor['bytes'] // 2**20} MiB: {floor['median_s'] * 1e3:.2f} ms "
                f"({floor['gb_per_s']:.1f} GB/s, read + write)")
    rates = ", ".join(f"{name} {_rate(entry)}" for name, entry in floor["blas"].items())
    linked = f" (Ember links {floor['ember_blas']})" if floor.get("ember_blas") else ""
    bf16 = f"; bfloat16 GEMM: {_bf16_rates(floor['bf16'])}" if "bf16" in floor else ""
    peak = floor.get(FMA_PEAK)
    fma = "" if peak is None else f"; float32 FMA peak: {_rate(peak)}" + (
        f" on {peak['threads']} threads" if peak["status"] == "ok" else f" ({peak['reason']})")
    return f"SGEMM {floor['n']}^3: {rates}{linked}{bf16}{fma}"


def _notes(summary: dict) -> list[str]:
    """Why each cell that is not a time is what it is, one line per framework and reason."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for name, entry in summary["workloads"].items():
        for fw, m in entry["frameworks"].items():
            if m["status"] != "ok":
                key = (fw, m["status"].upper() if m["status"] != "n/a" else "n/a", m["reason"] or "")
                grouped.setdefault(key, []).append(name)
    everything = list(summary["workloads"])
    lines = []
    for (fw, status, reason), names in grouped.items():
        where = "all workloads" if names == everything and len(names) > 1 else ", ".join(names)
        lines.append(f"  {fw} {status} on {where}: {reason}")
    return lines


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows]


def format_table(summary: dict) -> str:
    machine, settings = summary["machine"], summary["settings"]
    peers = [fw for fw in summary["frameworks"] if fw != "ember"]
    versions = ", ".join(f"{name} {version or '-'}" for name, version in machine["versions"].items())
    lines = [
        f"Ember bench, {machine['date']}: {settings['sizes']} sizes, "
        f"median of {settings['repeats']} timed runs after {settings['warmup']} warm-up "
        f"(compile_*: median of {settings['compile_repeats']} fresh processes)",
        f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['platform']}, "
        f"Python {machine['python']}",
        f"versions: {versions}; Ember backend: {machine['ember_backend']}",
    ]
    if machine.get("gpu"):
        lines.append(f"gpu: {machine['gpu']}; the peers run on it too (NumPy, which would time "
                     "the host, is left out)")
    if machine["env"]:
        lines.append("env: " + " ".join(f"{k}={v}" for k, v in machine["env"].items()))
    lines.append("")

    rows = [["workload", "unit", "ember"] + peers + ["ember vs floor"]]
    for name, entry in summary["workloads"].items():
        by_framework, unit = entry["frameworks"], entry["unit"]
        rows.append([name, unit, _ember_cell(by_framework.get("ember"), unit)]
                    + [_peer_cell(by_framework.get(fw), unit, entry["ratios"].get(fw)) for fw in peers]
                    + [_floor_cell(entry)])
    lines += _align(rows)
    lines += ["", "(x.xx): peer time / Ember time, above 1 means Ember is faster.",
              "ember vs floor: Ember time / the copy floor scaled to the bytes the workload "
              "reads and writes; for mlp_step, the share of the FMA peak (else of the best "
              "SGEMM rate) Ember reaches."]
    if summary["floors"]:
        lines += ["floors, measured in this run:"]
        lines += [f"  {floor_line(kind, floor)}" for kind, floor in summary["floors"].items()]
    notes = _notes(summary)
    if notes:
        lines += ["notes:"] + notes
    return "\n".join(lines)
