"""What a mode is: one small frozen record per mode (collector/modes/<name>.py). No torch here."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModeSpec:
    """A compile mode of the matrix.

    name: the matrix's spelling; compile_mode: what torch.compile(mode=...) gets (None: the mode
    does not go through torch.compile); kind: "eager" (the baseline only), "compile"
    (torch.compile) or "aot" (torch.export + AOTInductor package); cudagraphs: the mode replays
    CUDA graphs (train steps call cudagraph_mark_step_begin; at least 3 warm-up calls: warm-up,
    record, replay); infer_only: no training cells; dynamic_axis: torch.compile's `dynamic`
    applies; portable_cache: torch.compiler.save/load_cache_artifacts apply.
    """

    name: str
    description: str
    kind: str = "compile"
    compile_mode: str | None = None
    cudagraphs: bool = False
    infer_only: bool = False

    @property
    def compiles(self) -> bool:
        return self.kind != "eager"

    @property
    def dynamic_axis(self) -> bool:
        return self.kind == "compile"

    @property
    def portable_cache(self) -> bool:
        return self.kind == "compile"

    @property
    def min_warmup_calls(self) -> int:
        return 3 if self.cudagraphs else 2
