from collector.modes.base import ModeSpec

# max-autotune also turns CUDA graphs on, so it mixes two effects; max-autotune-no-cudagraphs separates them
SPEC = ModeSpec("max-autotune", "torch.compile(mode='max-autotune'): autotuned kernels and CUDA graphs",
                compile_mode="max-autotune", cudagraphs=True)
