"""Where the int8 search runs (precision.int8_support), decided on
descriptions of machines: no TensorFlow op, no dependence on this CPU."""
import dataclasses

from absl import logging

from t2tlite import hardware, onednn, precision
from t2tlite.decode import machine
from t2tlite.decode.settings import DecodeHParams

ON = onednn.Setting("1", onednn.BY_T2TLITE)
OFF_BY_USER = onednn.Setting("0", onednn.BY_USER)
# AMD Zen 3: AVX2 and FMA, no AVX-512, no VNNI. TensorFlow leaves oneDNN off
# there by default; t2tlite turns it on.
ZEN3 = hardware.Device(cpu_model="AMD EPYC 7763", cpu_family="25",
                        cpu_model_number="1",
                        cpu_flags=frozenset({"avx2", "fma"}),
                        onednn_enabled=True, onednn_setting=ON)
ZEN4 = hardware.Device(cpu_model="AMD EPYC 9654", cpu_family="25",
                        cpu_model_number="17", cpu_flags=frozenset(
                            {"avx2", "fma", "avx512f", "avx512_vnni",
                             "avx512_bf16"}),
                        onednn_enabled=True, onednn_setting=ON)
XEON_VNNI = hardware.Device(cpu_model="Intel Xeon Gold 6248", cpu_family="6",
                             cpu_model_number="85", cpu_flags=frozenset(
                                 {"avx2", "fma", "avx512f", "avx512_vnni"}))
XEON_NO_VNNI = hardware.Device(cpu_model="Intel Xeon Gold 6148",
                                cpu_family="6", cpu_model_number="85",
                                cpu_flags=frozenset({"avx2", "fma",
                                                     "avx512f"}))


def test_zen3_with_onednn_on_runs_int8_without_vnni():
  support = precision.int8_support(ZEN3)
  assert support.available and not support.weights_first
  assert "no VNNI" in support.reason


def test_zen3_with_onednn_off_falls_back_and_says_why():
  off = dataclasses.replace(ZEN3, onednn_enabled=False,
                            onednn_setting=OFF_BY_USER)
  support = precision.int8_support(off)
  assert not support.available and not support.weights_first
  assert "oneDNN path" in support.reason
  assert "TF_ENABLE_ONEDNN_OPTS=0, set by the user" in support.reason


def test_zen4_and_xeon_with_vnni_put_the_weights_first():
  for device in (ZEN4, XEON_VNNI):
    support = precision.int8_support(device)
    assert support.available and support.weights_first
    assert "avx512_vnni" in support.reason


def test_xeon_without_vnni_keeps_the_activations_first():
  support = precision.int8_support(XEON_NO_VNNI)
  assert support.available and not support.weights_first


def test_an_isa_cap_rules_out_vnni_or_int8():
  # describe_device applies the cap to the flags it reports.
  capped = dataclasses.replace(ZEN4, isa_cap="AVX2", cpu_flags=(
      hardware.usable_cpu_flags(ZEN4.cpu_flags, "AVX2")))
  support = precision.int8_support(capped)
  assert support.available and not support.weights_first
  assert "ONEDNN_MAX_CPU_ISA=AVX2" in support.reason
  below = dataclasses.replace(ZEN4, isa_cap="AVX")
  support = precision.int8_support(below)
  assert not support.available and "ONEDNN_MAX_CPU_ISA=AVX" in support.reason
  # A cap that keeps VNNI (or ALL) is not blamed for a CPU without it.
  for cap in ("ALL", "AVX512_CORE_BF16"):
    support = precision.int8_support(dataclasses.replace(XEON_NO_VNNI,
                                                         isa_cap=cap))
    assert support.reason == ("oneDNN's u8 x s8 kernel with AVX2's "
                              "multiply-add, no VNNI"), cap


def test_gpu_machines_and_other_architectures_decode_in_float():
  gpu = dataclasses.replace(ZEN4, gpus=(hardware.Gpu("NVIDIA A100", (8, 0)),))
  support = precision.int8_support(gpu)
  assert not support.available and "NVIDIA A100" in support.reason
  arm = dataclasses.replace(ZEN3, machine="aarch64", cpu_flags=frozenset())
  support = precision.int8_support(arm)
  assert not support.available and "aarch64" in support.reason


def test_windows_names_x86_amd64_and_runs_int8():
  # platform.machine() is "AMD64" on Windows.
  support = precision.int8_support(dataclasses.replace(ZEN4, machine="AMD64"))
  assert support.available and support.weights_first


def test_an_x86_cpu_without_avx2_cannot_run_int8():
  sandy_bridge = hardware.Device(cpu_model="Intel Xeon E5-2670",
                                 cpu_family="6", cpu_model_number="45",
                                 cpu_flags=frozenset({"avx", "sse4_2"}),
                                 onednn_enabled=True, onednn_setting=ON)
  support = precision.int8_support(sandy_bridge)
  assert not support.available and not support.weights_first
  assert support.reason == ("int8 decoding needs AVX2 or later, and this CPU "
                            "has no avx2")


def test_decoding_turns_int8_off_where_unavailable_saying_why_once(
    monkeypatch):
  warnings = []
  monkeypatch.setattr(logging, "warning",
                      lambda fmt, *args: warnings.append(fmt % args))
  monkeypatch.setattr(machine, "_int8_reasons_logged", set())
  off = dataclasses.replace(ZEN3, onednn_enabled=False,
                            onednn_setting=OFF_BY_USER)
  hp = DecodeHParams(int8=True, beam_size=2, concurrent_searches=1)
  for _ in range(2):
    settled = machine.settle(hp, device=off)
    assert not settled.int8 and not settled.hp.int8
    assert not settled.weights_first and not settled.int8_per_call
    assert settled.hp.beam_size == 2
    assert "TF_ENABLE_ONEDNN_OPTS=0" in settled.int8_reason
  assert len(warnings) == 1 and "TF_ENABLE_ONEDNN_OPTS=0" in warnings[0]
  # Where it computes, int8 is decided here, once: no choice in the graph.
  vnni = machine.settle(hp, device=ZEN4)
  assert (vnni.hp, vnni.int8, vnni.weights_first) == (hp, True, True)
  assert not vnni.int8_per_call
  avx2 = machine.settle(hp, device=ZEN3)
  assert (avx2.hp, avx2.int8, avx2.weights_first) == (hp, True, False)
  # An export keeps int8: its graph picks at each request, wherever served.
  for device in (off, ZEN4):
    export = machine.settle(hp, device=device, int8_per_call=True)
    assert export.hp == hp and export.int8 and export.int8_per_call
  assert len(warnings) == 1
