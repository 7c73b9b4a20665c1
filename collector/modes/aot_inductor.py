from collector.modes.base import ModeSpec

SPEC = ModeSpec("aot-inductor", "torch.export + AOTInductor package, loaded and run (inference only)",
                kind="aot", infer_only=True)
