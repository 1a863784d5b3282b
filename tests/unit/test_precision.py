"""Precision by machine: auto's rule on device descriptions given as data,
the warning for an emulated explicit choice, the benchmarks' fingerprint
(bench/fingerprint.py) and float16's
dynamic loss scaling. (t2t-trainer saying and recording its choice:
tests/end_to_end/test_export.py, test_trainer_exports_when_training_ends.)"""
import dataclasses
import datetime
import importlib.util
import json
import logging
import os

import numpy as np
import pytest

from t2tlite import bfloat16_check
from t2tlite import hardware
from t2tlite import precision
from t2tlite.hardware import Device, Gpu

import require_all

import train_helpers

_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench", "fingerprint.py")
_spec = importlib.util.spec_from_file_location("bench_fingerprint", _BENCH)
bench_fingerprint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_fingerprint)

ZEN3 = Device(cpu_model="AMD Ryzen 9 5950X", cpu_family="25",
              cpu_model_number="33", cores=16,
              cpu_flags=frozenset({"avx", "avx2", "fma"}))
ZEN4 = Device(cpu_model="AMD EPYC 9654", cpu_family="25",
              cpu_model_number="17", cores=2,
              cpu_flags=frozenset({"avx2", "avx512f", "avx512_bf16"}))
SAPPHIRE_RAPIDS = Device(cpu_model="Intel Xeon Platinum 8480+",
                         cpu_flags=frozenset({"avx2", "avx512f", "amx_bf16",
                                              "amx_tile"}))
V100 = Device(cpu_model="Intel Xeon", cpu_flags=frozenset({"avx2"}),
              gpus=(Gpu("Tesla V100-SXM2-16GB", (7, 0)),))
A100 = Device(cpu_model="AMD EPYC 7763", cpu_flags=frozenset({"avx2"}),
              gpus=(Gpu("NVIDIA A100-SXM4-40GB", (8, 0)),))
P100 = Device(cpu_model="Intel Xeon", cpu_flags=frozenset({"avx2"}),
              gpus=(Gpu("Tesla P100-PCIE-16GB", (6, 0)),))


@pytest.mark.parametrize("device,expected", [
    (ZEN3, "float32"),            # AVX2 only: bf16 would be emulated
    (Device(), "float32"),        # nothing known about the CPU
    (ZEN4, "bfloat16"),           # avx512_bf16
    (SAPPHIRE_RAPIDS, "bfloat16"),  # amx_bf16
    (V100, "float16"),            # tensor cores, no bf16
    (A100, "bfloat16"),
    (P100, "float32"),            # no tensor cores
])
def test_auto_picks_the_native_precision(device, expected):
  choice = precision.choose("auto", device)
  assert choice.precision == expected and choice.requested == "auto"
  assert choice.warning is None
  assert choice.loss_scaling == (expected == "float16")
  assert choice.keras_policy == {"float32": None,
                                 "bfloat16": "mixed_bfloat16",
                                 "float16": "mixed_float16"}[expected]


def test_reasons_name_the_device_and_its_flags():
  assert "without avx512_bf16 or amx_bf16" in precision.choose(
      "auto", ZEN3).reason
  assert "AMD Ryzen 9 5950X" in precision.choose("auto", ZEN3).reason
  assert "with amx_bf16" in precision.choose("auto", SAPPHIRE_RAPIDS).reason
  assert "compute capability 7.0" in precision.choose("auto", V100).reason
  assert "loss scaling" in precision.choose("auto", V100).reason


# The same flags, measured: an Intel Xeon whose hypervisor hides AMX ran
# oneDNN's avx512_bf16 matmul at 0.6x float32; Zen 4 at about 1.8x.
XEON_AMX_HIDDEN = dataclasses.replace(
    ZEN4, cpu_model="Intel Xeon Processor", cpu_family="6",
    cpu_model_number="207", bfloat16_speedup=0.6)
ZEN4_MEASURED = dataclasses.replace(ZEN4, bfloat16_speedup=1.8)


def test_auto_keeps_float32_where_bfloat16_measured_slower():
  choice = precision.choose("auto", XEON_AMX_HIDDEN)
  assert choice.precision == "float32" and choice.warning is None
  assert "with avx512_bf16" in choice.reason
  assert "measured 0.60x float32" in choice.reason
  assert precision.choose("auto", ZEN4_MEASURED).precision == "bfloat16"
  # Just below the threshold is still too slow.
  borderline = dataclasses.replace(
      ZEN4, bfloat16_speedup=precision.MIN_BFLOAT16_SPEEDUP - 0.01)
  assert precision.choose("auto", borderline).precision == "float32"


def test_explicit_bfloat16_measured_slower_runs_and_warns():
  choice = precision.choose("bfloat16", XEON_AMX_HIDDEN)
  assert choice.precision == "bfloat16"
  assert "measured 0.60x float32" in choice.warning
  assert "use float32" in choice.warning
  assert precision.choose("bfloat16", ZEN4_MEASURED).warning is None


def test_the_slowest_gpu_decides():
  mixed = Device(gpus=(Gpu("A100", (8, 0)), Gpu("T4", (7, 5))))
  choice = precision.choose("auto", mixed)
  assert choice.precision == "float16"
  assert "2 x T4 (compute capability 7.5)" in choice.reason


def test_explicit_emulated_precision_is_used_and_warns_once(caplog):
  choice = precision.choose("bfloat16", ZEN3)
  assert choice.precision == "bfloat16" and choice.requested == "bfloat16"
  assert "AMD Ryzen 9 5950X" in choice.warning
  assert "emulates bfloat16" in choice.warning
  assert "use float32" in choice.warning
  # absl's logger has a level of its own once absl flags were parsed.
  with caplog.at_level(logging.INFO, logger="absl"):
    precision.announce(choice)
    precision.announce(precision.choose("bfloat16", ZEN3))
  warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
  assert [r.getMessage() for r in warnings] == [choice.warning]
  infos = [r.getMessage() for r in caplog.records
           if r.levelno == logging.INFO]
  assert len(infos) == 2 and "Training computes in bfloat16" in infos[0]


@pytest.mark.parametrize("requested,device,faster", [
    ("float16", ZEN4, "bfloat16"),     # no CPU computes float16 natively
    ("float16", ZEN3, "float32"),
    ("bfloat16", V100, "float16"),
    ("float16", P100, "float32"),
])
def test_other_emulated_choices_name_the_faster_one(requested, device,
                                                    faster):
  choice = precision.choose(requested, device)
  assert choice.precision == requested
  assert f"use {faster}" in choice.warning


def test_explicit_native_choices_do_not_warn():
  assert precision.choose("bfloat16", ZEN4).warning is None
  assert precision.choose("float16", V100).warning is None
  float32 = precision.choose("float32", ZEN4)
  assert float32.warning is None and "auto would pick bfloat16" in (
      float32.reason)


def test_unknown_precision_is_an_error():
  with pytest.raises(ValueError, match="'fp8'.*expected auto"):
    precision.choose("fp8", ZEN3)


def test_fingerprint_line():
  line = bench_fingerprint.fingerprint(ZEN3, peaks={"float32": 116.0,
                                            "bfloat16": 88.0})
  assert line.startswith("AMD Ryzen 9 5950X (family 25 model 33), 16 cores, "
                         "avx2 -avx512f -avx512_bf16 -amx_bf16, no GPU, TF ")
  assert line.endswith("matmul 1024^3: float32 116 GFLOP/s, bfloat16 88 "
                       "GFLOP/s")
  assert "GPU NVIDIA A100-SXM4-40GB cc 8.0" in bench_fingerprint.fingerprint(
      A100, peaks={})


def test_an_isa_cap_rules_out_the_bfloat16_flags_it_excludes():
  zen4 = {"avx2", "avx512f", "avx512_bf16"}
  sapphire_rapids = zen4 | {"amx_bf16"}
  assert hardware.usable_cpu_flags(zen4) == zen4
  assert hardware.usable_cpu_flags(zen4, "ALL") == zen4
  assert hardware.usable_cpu_flags(zen4, "avx2") == {"avx2", "avx512f"}
  assert hardware.usable_cpu_flags(sapphire_rapids, "AVX512_CORE_BF16") == zen4
  assert hardware.usable_cpu_flags(sapphire_rapids, "AVX512_CORE_AMX") == (
      sapphire_rapids)
  # ALL, in any case, is oneDNN's "no cap".
  assert hardware.usable_cpu_flags(sapphire_rapids, "ALL") == sapphire_rapids
  assert hardware.usable_cpu_flags(sapphire_rapids, "all") == sapphire_rapids
  capped = dataclasses.replace(ZEN4, cpu_flags=hardware.usable_cpu_flags(
      ZEN4.cpu_flags, "AVX2"), isa_cap="AVX2")
  assert precision.choose("auto", capped).precision == "float32"
  assert "(ONEDNN_MAX_CPU_ISA=AVX2)" in bench_fingerprint.fingerprint(
      capped, peaks={"float32": 100.0})


def test_this_machine_is_described_from_cpuinfo(tmp_path, monkeypatch):
  monkeypatch.setenv(bfloat16_check.CACHE_DIR_ENV, str(tmp_path))
  device = hardware.describe_device.__wrapped__()
  assert device.cores == os.cpu_count()
  if os.path.exists("/proc/cpuinfo"):
    with open("/proc/cpuinfo") as f:
      flags = next(l for l in f if l.startswith("flags")).split(":")[1]
    assert device.cpu_flags == frozenset(flags.split())
  peak = bench_fingerprint.matmul_gflops("bfloat16", n=128, repeats=2)
  assert np.isfinite(peak) and peak > 0


def test_this_machines_bfloat16_speedup_is_measured_and_kept(tmp_path,
                                                             monkeypatch):
  """The bfloat16 speedup is measured exactly where the flags alone would
  have picked bfloat16, and kept for the next process."""
  monkeypatch.setenv(bfloat16_check.CACHE_DIR_ENV, str(tmp_path))
  device = hardware.describe_device.__wrapped__()
  if device.gpus or not device.cpu_bf16_flags():
    lacks = "has a GPU" if device.gpus else "has no CPU bfloat16 flag"
    require_all.machine_skip(
        f"it {lacks}: no speedup to measure (the case without one: "
        "test_no_speedup_is_measured_without_a_cpu_bfloat16_flag_or_with_a_"
        "gpu)")
  kept = tmp_path / "bfloat16_speedup.json"
  assert 0 < device.bfloat16_speedup < 100
  assert (precision.choose("auto", device).precision == "bfloat16") == (
      device.bfloat16_speedup >= precision.MIN_BFLOAT16_SPEEDUP)
  assert json.loads(kept.read_text()) == {bfloat16_check.machine_key(device): {
      "speedup": device.bfloat16_speedup,
      "date": datetime.date.today().isoformat()}}
  assert device.measured.endswith(f"kept in {kept}")


@pytest.mark.parametrize("flags,gpus", [
    ("avx2 avx512f", ()),
    ("avx2 avx512f avx512_bf16", (Gpu("Tesla V100-SXM2-16GB", (7, 0)),))])
def test_no_speedup_is_measured_without_a_cpu_bfloat16_flag_or_with_a_gpu(
    tmp_path, monkeypatch, flags, gpus):
  monkeypatch.setenv(bfloat16_check.CACHE_DIR_ENV, str(tmp_path))
  monkeypatch.setattr(hardware, "cpuinfo", lambda: {
      "model name": "AMD Ryzen 9 5950X", "flags": flags})
  monkeypatch.setattr(hardware, "_gpus", lambda: gpus)
  monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)

  def measure():
    raise AssertionError("measured the bfloat16 speedup")

  monkeypatch.setattr(bfloat16_check, "bfloat16_speedup", measure)
  device = hardware.describe_device.__wrapped__()
  assert device.gpus == gpus
  assert device.bfloat16_speedup is None
  assert os.listdir(tmp_path) == []


def _bf16_cpu_device(monkeypatch, tmp_path, speedups):
  """describe_device on a CPU with avx512_bf16 whose measurements return
  `speedups` one by one (the cache lives in tmp_path)."""
  monkeypatch.setenv(bfloat16_check.CACHE_DIR_ENV, str(tmp_path))
  monkeypatch.setattr(hardware, "cpuinfo", lambda: {
      "model name": "AMD EPYC 9654", "cpu family": "25", "model": "17",
      "flags": "avx2 avx512f avx512_bf16"})
  monkeypatch.setattr(hardware, "_gpus", lambda: ())
  monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
  measured = iter(speedups)
  monkeypatch.setattr(bfloat16_check, "bfloat16_speedup",
                      lambda: next(measured))
  return lambda **kw: hardware.describe_device.__wrapped__(**kw)


def test_the_speedup_is_measured_once_per_machine_and_kept(tmp_path,
                                                          monkeypatch):
  describe = _bf16_cpu_device(monkeypatch, tmp_path, [2.1, 0.7])
  first = describe()
  assert first.bfloat16_speedup == 2.1
  # Another process on the machine reads it instead of measuring again, so
  # a run, its resumption and the decoder make one choice.
  assert describe().bfloat16_speedup == 2.1
  assert precision.choose("auto", describe()).precision == "bfloat16"
  again = describe(remeasure=True)
  assert again.bfloat16_speedup == 0.7
  assert "kept in" in precision.choose("auto", again).reason
  assert describe().bfloat16_speedup == 0.7
  # Only the file remains: it was written under another name and renamed.
  assert os.listdir(tmp_path) == ["bfloat16_speedup.json"]
  # Another TensorFlow or ISA cap is another machine.
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
  monkeypatch.setattr(bfloat16_check, "bfloat16_speedup", lambda: 1.9)
  assert describe().bfloat16_speedup == 1.9
  assert len(json.loads((tmp_path / "bfloat16_speedup.json").read_text())) == 2


@pytest.mark.parametrize("damaged", ['{"AMD EPYC 9654 (family 25',
                                     '[{"speedup": 2.1}]'],
                         ids=["cut_short", "not_an_object"])
def test_a_damaged_speedup_file_is_named_and_measured_again(
    tmp_path, monkeypatch, caplog, damaged):
  describe = _bf16_cpu_device(monkeypatch, tmp_path, [0.6])
  kept = tmp_path / "bfloat16_speedup.json"
  kept.write_text(damaged)
  with caplog.at_level(logging.WARNING):
    assert describe().bfloat16_speedup == 0.6
  assert f"Ignoring {kept}" in caplog.text
  assert list(json.loads(kept.read_text()).values())[0]["speedup"] == 0.6


def test_the_speedup_file_cannot_be_written_then_each_process_measures(
    tmp_path, monkeypatch, caplog):
  blocker = tmp_path / "a_file"
  blocker.write_text("")
  describe = _bf16_cpu_device(monkeypatch, blocker, [0.6, 0.65])
  with caplog.at_level(logging.WARNING):
    assert describe().bfloat16_speedup == 0.6
    assert describe().bfloat16_speedup == 0.65
  assert "Could not keep the bfloat16 speedup" in caplog.text


def test_a_kept_speedup_that_is_not_a_number_is_measured_again(
    tmp_path, monkeypatch):
  describe = _bf16_cpu_device(monkeypatch, tmp_path, [2.1, 1.9])
  key = bfloat16_check.machine_key(describe())
  kept = tmp_path / "bfloat16_speedup.json"
  kept.write_text(json.dumps({key: {"speedup": None, "date": "2026-11-25"}}))
  assert describe().bfloat16_speedup == 1.9
  assert json.loads(kept.read_text())[key]["speedup"] == 1.9


@pytest.mark.timeout(120)
def test_float16_training_scales_the_loss_dynamically(tmp_path):
  """An overflowing loss scale skips the update and halves the scale: the
  loss scaling that keeps float16 gradients in range on a GPU."""
  from t2tlite.train import strategy as strategy_lib
  strategy = strategy_lib.make_strategy(0, tf_config="")
  trainer = train_helpers.tiny_trainer(str(tmp_path), strategy,
                                       mixed_precision="float16")
  optimizer = trainer.optimizer
  iterator = iter(trainer.make_dataset("train", True))
  trainer.train_step(iterator)
  assert trainer.step == 1
  # float16 overflows above 65504: a scale of 2^100 makes every gradient inf.
  optimizer.dynamic_scale.assign(2.0**100)
  before = [w.numpy() for w in trainer.model.trainable_weights]
  out = trainer.train_step(iterator)
  assert np.isfinite(float(out["loss"]))
  assert trainer.step == 1          # the update was skipped ...
  assert float(optimizer.dynamic_scale.numpy()) == 2.0**99  # ... scale halved
  for old, new in zip(before, trainer.model.trainable_weights):
    np.testing.assert_array_equal(old, new.numpy())
  optimizer.dynamic_scale.assign(2.0**10)
  trainer.train_step(iterator)
  assert trainer.step == 2


def test_the_machine_line_has_no_peaks():
  line = hardware.machine_line(ZEN3)
  assert line.startswith("AMD Ryzen 9 5950X (family 25 model 33), 16 cores, "
                         "avx2 -avx512f -avx512_bf16 -amx_bf16, no GPU, TF ")
  assert "GFLOP/s" not in line


def test_cpuinfo_reads_the_first_processor(tmp_path):
  path = tmp_path / "cpuinfo"
  path.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9654\n"
                  "flags\t\t: avx2 avx512f avx512_bf16\n\n"
                  "processor\t: 1\nmodel name\t: AMD EPYC 9654\n"
                  "flags\t\t: avx2\n\n")
  assert hardware.cpuinfo(str(path)) == {
      "processor": "0", "model name": "AMD EPYC 9654",
      "flags": "avx2 avx512f avx512_bf16"}
  assert hardware.cpuinfo(str(tmp_path / "missing")) == {}


def test_an_isa_cap_rules_out_the_vnni_flags_it_excludes():
  alder_lake = {"avx2", "avx_vnni"}
  sapphire_rapids = {"avx2", "avx512f", "avx_vnni", "avx512_vnni"}
  assert hardware.usable_cpu_flags(alder_lake, "AVX2_VNNI") == alder_lake
  assert hardware.usable_cpu_flags(alder_lake, "AVX2") == {"avx2"}
  assert hardware.usable_cpu_flags(sapphire_rapids, "AVX2_VNNI") == {
      "avx2", "avx512f", "avx_vnni"}
  assert hardware.usable_cpu_flags(sapphire_rapids, "AVX512_CORE") == {
      "avx2", "avx512f"}
  assert hardware.usable_cpu_flags(sapphire_rapids, "AVX512_CORE_VNNI") == (
      sapphire_rapids)


def test_the_speedup_is_kept_per_set_of_usable_flags():
  """A CPU whose hypervisor hides AMX is another machine than the same
  model with AMX."""
  with_amx = dataclasses.replace(
      SAPPHIRE_RAPIDS, cpu_flags=SAPPHIRE_RAPIDS.cpu_flags | {"avx512_bf16"})
  without_amx = dataclasses.replace(
      with_amx, cpu_flags=with_amx.cpu_flags - {"amx_bf16"})
  assert bfloat16_check.machine_key(with_amx) != bfloat16_check.machine_key(
      without_amx)
  assert "avx2 avx512f avx512_bf16 amx_bf16" in bfloat16_check.machine_key(
      with_amx)


def test_the_speedup_is_the_median_ratio_after_the_warm_up(monkeypatch):
  """Timings given as data (a real matmul's vary): float32's first
  products are slow, as on a Xeon virtual machine."""
  seconds = {"float32": iter([3.0, 3.0, 1.0, 1.2, 1.1]),
             "bfloat16": iter([0.5] * 5)}
  monkeypatch.setattr(bfloat16_check, "matmul_timer",
                      lambda dtype, n: lambda: next(seconds[dtype]))
  assert bfloat16_check.bfloat16_speedup(pairs=3, warmup_pairs=2) == 2.2


def test_a_pair_split_by_a_burst_of_load_does_not_move_the_speedup(
    monkeypatch):
  seconds = {"float32": iter([1.0] * 5), "bfloat16": iter([0.5, 5.0, 0.4])}
  monkeypatch.setattr(bfloat16_check, "matmul_timer",
                      lambda dtype, n: lambda: next(seconds[dtype]))
  # Ratios 2.0, 0.2 and 2.5: the median, not the mean (1.57).
  assert bfloat16_check.bfloat16_speedup(pairs=3, warmup_pairs=0) == 2.0


def test_the_announcement_says_whether_onednn_computes(caplog):
  choice = precision.choose("float32", ZEN3)
  assert choice.onednn.startswith("oneDNN on")
  with caplog.at_level(logging.INFO, logger="absl"):
    precision.announce(choice, "Decoding")
  assert [r.getMessage() for r in caplog.records] == [
      f"Decoding computes in float32 (mixed_precision=float32): "
      f"{choice.reason}; {choice.onednn}."]


def test_a_gpu_computing_bfloat16_takes_any_precision_without_warning():
  """The GPU decides, not its host CPU (here without a bfloat16 flag)."""
  for requested in precision.PRECISIONS:
    choice = precision.choose(requested, A100)
    assert choice.precision == requested and choice.warning is None
  assert precision.choose("auto", A100).reason == (
      "GPU NVIDIA A100-SXM4-40GB (compute capability 8.0) computes bfloat16 "
      "natively")


def test_a_lower_case_isa_cap_below_avx2_rules_int8_out():
  capped = dataclasses.replace(
      ZEN4, isa_cap="avx",
      cpu_flags=hardware.usable_cpu_flags(ZEN4.cpu_flags, "avx"))
  support = precision.int8_support(capped)
  assert not support.available
  assert "ONEDNN_MAX_CPU_ISA=avx" in support.reason


def test_this_machines_isa_cap_hides_its_bfloat16_flags(tmp_path,
                                                        monkeypatch):
  """No speedup is measured for flags oneDNN may not use."""
  describe = _bf16_cpu_device(monkeypatch, tmp_path, [])
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
  device = describe()
  assert device.isa_cap == "AVX2"
  assert device.cpu_flags == {"avx2", "avx512f"}
  assert device.bfloat16_speedup is None
  assert precision.choose("auto", device).precision == "float32"


def test_the_check_command_prints_the_choice_and_int8(monkeypatch, capsys):
  """`python -m t2tlite.precision` on a CPU with avx512_bf16 and no VNNI:
  int8 runs without the weights-first layout of VNNI."""
  import tensorflow  # noqa: F401  (loaded: main's quiet start does nothing)
  device = dataclasses.replace(ZEN4_MEASURED, measured="2026-11-25, kept in x")
  monkeypatch.setattr(hardware, "describe_device",
                      lambda remeasure=False: device)
  precision.main([])
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].startswith("machine: AMD EPYC 9654 (family 25 model 17), "
                             "2 cores, avx2 avx512f avx512_bf16 -amx_bf16, ")
  assert lines[1:] == [
      "bfloat16 matmul speedup: 1.8x (auto needs 1.2x; measured 2026-11-25, "
      "kept in x)",
      "auto precision: bfloat16 (CPU AMD EPYC 9654 with avx512_bf16 computes "
      "bfloat16 natively)",
      "kernels: oneDNN on (default set by t2tlite)",
      "int8 decoding: available (oneDNN's u8 x s8 kernel with AVX2's "
      "multiply-add, no VNNI)"]
