from collector.modes.base import ModeSpec

SPEC = ModeSpec("default", "torch.compile(mode='default'): Inductor, no CUDA graphs", compile_mode="default")
