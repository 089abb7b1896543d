"""modeling_vaswani/machine.py: the machine line recorded beside every measured number, and the timing of
alternatives that the probes use."""

import sysconfig

import pytest

from modeling_vaswani.machine import cpp_compiler, describe_machine, fastest, hardware_line


def test_the_line_names_the_cpu_its_threads_and_bf16_support_or_the_gpu_and_this_machine_has_every_fact():
    info = {"cpu": "AMD EPYC", "torch_threads": 2, "cpu_bf16": "none"}
    assert hardware_line(info) == "CPU: AMD EPYC, 2 threads, bf16: none"
    assert hardware_line({**info, "torch_threads": 1}) == "CPU: AMD EPYC, 1 thread, bf16: none"
    assert hardware_line({**info, "gpu": "NVIDIA H200"}) == "NVIDIA H200"
    info = describe_machine()
    line = hardware_line({key: value for key, value in info.items() if key != "gpu"})
    assert line.startswith(f"CPU: {info['cpu']}, {info['torch_threads']} thread") and "\n" not in line


def test_without_python_s_headers_there_is_no_compiler_for_torch_compile(monkeypatch, tmp_path):
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *args, **kwargs: str(tmp_path))  # no Python.h there
    assert cpp_compiler() is None


def test_fastest_alternates_and_compares_the_best_run_of_each():
    now, calls = [0.0], []
    busy = iter([2.0, 1.55, 1.40])  # bf16's steps: warm-up, one while the machine was busy, one not

    def run(name):
        calls.append(name)
        now[0] += 1.48 if name == "fp32" else next(busy, 0.0)

    best = fastest({"fp32": lambda: run("fp32"), "bf16": lambda: run("bf16")}, rounds=2, clock=lambda: now[0])
    assert calls == ["fp32", "bf16", "fp32", "bf16", "bf16", "fp32"]  # untimed, then A B, B A
    assert best == pytest.approx({"fp32": 1.48, "bf16": 1.40})
