from collector.modes.base import ModeSpec

SPEC = ModeSpec("max-autotune-no-cudagraphs", "torch.compile(mode='max-autotune-no-cudagraphs'): autotuned kernels",
                compile_mode="max-autotune-no-cudagraphs")
