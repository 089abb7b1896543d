"""modeling_vaswani/machine.py: the machine line recorded beside every measured number."""

from modeling_vaswani.machine import describe_machine, hardware_line


def test_the_line_names_the_cpu_its_threads_and_bf16_support():
    info = {"cpu": "AMD EPYC", "torch_threads": 2, "cpu_bf16": "none"}
    assert hardware_line(info) == "CPU: AMD EPYC, 2 threads, bf16: none"
    assert hardware_line({**info, "torch_threads": 1}) == "CPU: AMD EPYC, 1 thread, bf16: none"


def test_a_gpu_is_named_instead_of_the_cpu():
    assert hardware_line({"cpu": "x", "torch_threads": 2, "cpu_bf16": "amx", "gpu": "NVIDIA H200"}) == "NVIDIA H200"


def test_this_machine_has_every_fact_the_line_needs():
    info = describe_machine()
    cpu_only = {key: value for key, value in info.items() if key != "gpu"}
    line = hardware_line(cpu_only)
    assert line.startswith(f"CPU: {info['cpu']}, {info['torch_threads']} thread") and "\n" not in line
