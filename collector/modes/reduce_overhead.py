from collector.modes.base import ModeSpec

SPEC = ModeSpec("reduce-overhead", "torch.compile(mode='reduce-overhead'): Inductor with CUDA graphs",
                compile_mode="reduce-overhead", cudagraphs=True)
