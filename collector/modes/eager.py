from collector.modes.base import ModeSpec

SPEC = ModeSpec("eager", "the eager baseline alone (no compiled side)", kind="eager")
