"""`hf:<ModelClass>`: a Hugging Face transformers model built from its config class's defaults, with
random weights and synthetic inputs: no download, no tokenizer (runs in the cell process).

Inputs by the model's main input: token ids (`input_ids`, `seq_len` tokens, the model's own limit
where that is shorter; an encoder-decoder's decoder gets as many, or its `max_target_positions`),
pixels (`pixel_values` at the config's image size) or a speech model's log-mel features
(`input_features`: `num_mel_bins` x twice `max_source_positions` frames, as Whisper's feature
extractor makes 30 s of audio). A class whose main input is none of these is `skipped`, with the
reason. `attention_mask`: `none` (the default: PyTorch's harness passes token ids and labels only),
`ones` (a mask of ones, as a tokenizer gives an unpadded batch) or `padded` (row i of a batch keeps
the first seq_len - i * seq_len / (2 x batch) tokens, as a padded batch of unequal texts: the mask a
real caller passes, which transformers cannot skip).

As PyTorch's own Hugging Face suite builds its models: `ModelClass(ModelClass.config_class())`,
random token ids of the config's vocabulary (or random pixel values of its image size), and labels
where the class has a head that takes them, so the model computes its own loss; a class without one
(a base model) is trained on the mean of its output. Dropout and layer drop are set to 0 unless an
option asks otherwise: random masks would make eager and compiled outputs differ beyond tolerance.
"""
from __future__ import annotations

from collector.models.base import Built, ModelSkipped

OWN = ("seq_len", "image_size", "attention_mask")  # options read here; the rest override fields of the config
MASKS = ("none", "ones", "padded")
SEQ_LEN = 512  # tokens, or the model's own limit where that is shorter
TOKEN_LABELS = ("ForMaskedLM", "ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ForPreTraining")


def model_class(name: str):
    """The transformers class `name`, or of a model shipped by name (hf_configs.NAMED); LookupError with
    the closest names if there is none."""
    import transformers

    from collector.models.hf_configs import NAMED

    if name in NAMED:
        return getattr(transformers, NAMED[name].cls)
    cls = getattr(transformers, name, None) if name.isidentifier() else None
    if cls is None or not isinstance(cls, type) or getattr(cls, "config_class", None) is None:
        import difflib

        classes = [n for n in dir(transformers) if ("For" in n or n.endswith("Model")) and n[:1].isupper()
                   and n != name] + list(NAMED)
        close = difflib.get_close_matches(name, classes, n=5, cutoff=0.6)
        if name.startswith("Auto") and cls is not None:  # a factory that picks a class from a config or a hub id
            raise LookupError(f"transformers' {name} is a factory, not a model class (it picks one from a config or a "
                              "hub id); name the class, e.g. BertForMaskedLM, GPT2LMHeadModel, LlamaForCausalLM")
        raise LookupError(f"transformers {transformers.__version__} has no model class {name!r}"
                          + (f"; closest: {', '.join(close)}" if close else
                             f" (e.g. BertForMaskedLM, GPT2LMHeadModel, T5ForConditionalGeneration, "
                             f"ViTForImageClassification)"))
    return cls


def make_config(cls, opts: dict, name: str | None = None):
    """The config class's defaults (with a model shipped by name, its published config's numbers:
    hf_configs.NAMED), dropout off, then the options that name config fields."""
    from collector.models.hf_configs import NAMED

    config = cls.config_class(**(NAMED[name].config if name in NAMED else {}))
    for key, value in list(vars(config).items()):
        if isinstance(value, float) and ("dropout" in key or "layerdrop" in key) and key not in opts:
            setattr(config, key, 0.0)
    for key, value in opts.items():
        if key in OWN and not (key == "image_size" and hasattr(config, key)):  # a vision config's own size
            continue
        if not hasattr(config, key):
            raise ValueError(f"{cls.config_class.__name__} has no field {key!r} (options other than "
                             f"{', '.join(OWN)} set fields of the model's config)")
        setattr(config, key, value)
    name = cls.__name__
    if name.endswith("ForCausalLM") and getattr(config, "is_decoder", True) is False and "is_decoder" not in opts:
        config.is_decoder = True  # an encoder family's causal-LM head (Electra, Bert, Roberta) asks for it
    if name.endswith("ForCausalLM") and isinstance(getattr(config, "decoder_layers", None), int):
        # an encoder-decoder family's decoder alone (Bart, Blenderbot, Pegasus, ...): transformers sizes
        # its key/value cache by num_hidden_layers, there the encoder's count (Blenderbot: 2 encoder, 24
        # decoder layers), and the inference forward fails past it (IndexError in cache_utils). The
        # decoder is the whole model: its count is decoder_layers, or num_hidden_layers where only that
        # option is given (a reduced model), and both fields carry it
        config.decoder_layers = config.num_hidden_layers = int(
            opts.get("decoder_layers", opts.get("num_hidden_layers", config.decoder_layers)))
    if name.endswith("ForSequenceClassification") and getattr(config, "pad_token_id", 0) is None:
        config.pad_token_id = 0  # GPT-2 and its kin refuse a batch of more than one without it
    return config


def _seq_len(config, opts: dict) -> int:
    limits = [getattr(config, k, None) for k in ("max_position_embeddings", "n_positions", "max_seq_len")]
    if "roberta" in str(getattr(config, "model_type", "")):  # positions start after the padding index
        limits = [v - int(config.pad_token_id or 0) - 1 if isinstance(v, int) else v for v in limits]
    limits = [v for v in limits if isinstance(v, int) and v > 0]
    return int(opts.get("seq_len") or min([SEQ_LEN] + limits))


def _attention_mask(kind: str, batch_size: int, seq: int):
    """The attention mask an `attention_mask` option asks for, or None (`none`)."""
    import torch

    if kind == "none":
        return None
    mask = torch.ones(batch_size, seq, dtype=torch.long)
    if kind == "padded":
        for i in range(batch_size):
            keep = max(1, seq - (i * seq) // (2 * batch_size))
            mask[i, keep:] = 0
    return mask


def _main_inputs(model, config, batch_size: int, opts: dict) -> tuple[list, list, list, dict]:
    """(names, inputs, indices of float inputs, settings) of the model's main input(s); ModelSkipped
    where the class's main input is not one this source builds."""
    import torch

    main = getattr(model, "main_input_name", "input_ids")
    mask_kind = str(opts.get("attention_mask", "none")).lower()
    if mask_kind not in MASKS:
        raise ValueError(f"attention_mask={opts.get('attention_mask')!r}: one of {', '.join(MASKS)}")
    if main == "pixel_values":
        size = int(opts.get("image_size") or getattr(config, "image_size", 224))
        return (["pixel_values"], [torch.randn(batch_size, getattr(config, "num_channels", 3), size, size)], [0],
                {"image_size": size})
    if main == "input_features":  # speech (Whisper): log-mel frames of 30 s, as its feature extractor pads to
        mels, frames = int(config.num_mel_bins), 2 * int(getattr(config, "max_source_positions", 1500))
        names, inputs = ["input_features"], [torch.randn(batch_size, mels, frames)]
        settings = {"mel_bins": mels, "frames": frames}
        if getattr(config, "is_encoder_decoder", False):
            seq = _decoder_len(config, _seq_len(config, opts))
            names.append("decoder_input_ids")
            inputs.append(torch.randint(0, int(config.vocab_size), (batch_size, seq)))
            settings["decoder_seq_len"] = seq
        return names, inputs, [0], settings
    if main != "input_ids":
        raise ModelSkipped(f"{type(model).__name__}'s main input is {main!r}: the hf: source builds token ids, "
                           "pixel values and speech features only")
    if not isinstance(getattr(config, "vocab_size", None), int):  # e.g. CLIP: text and image configs
        raise ModelSkipped(f"{type(model).__name__}'s config names no vocabulary of its own (a composite of "
                           "sub-model configs): the hf: source builds token ids from a config's vocab_size")
    seq, vocab = _seq_len(config, opts), int(config.vocab_size)
    names, inputs = ["input_ids"], [torch.randint(0, vocab, (batch_size, seq))]
    settings = {"seq_len": seq, "attention_mask": mask_kind}
    mask = _attention_mask(mask_kind, batch_size, seq)
    if mask is not None:
        names.append("attention_mask")
        inputs.append(mask)
    if getattr(config, "is_encoder_decoder", False):
        dec = _decoder_len(config, seq)
        names.append("decoder_input_ids")
        inputs.append(torch.randint(0, vocab, (batch_size, dec)))
        if dec != seq:
            settings["decoder_seq_len"] = dec
    return names, inputs, [], settings


def _decoder_len(config, seq: int) -> int:
    """An encoder-decoder's decoder length: `seq`, or the decoder's limit where that is shorter."""
    limit = getattr(config, "max_target_positions", None)
    return min(seq, int(limit)) if isinstance(limit, int) and limit > 0 else seq


def build(name: str, batch_size: int, opts: dict) -> Built:
    import torch

    cls = model_class(name)
    config = make_config(cls, opts, name)
    _fits(cls, config, name)
    model = cls(config)
    names, inputs, float_inputs, settings = _main_inputs(model, config, batch_size, opts)
    label = _labels(cls.__name__, config, batch_size, dict(zip(names, inputs)))
    for key, value in label.items():
        names.append(key)
        inputs.append(value)
    module = Step(model, tuple(names))
    if label:
        def loss(out, target):
            return out[0]  # the model's own loss
    else:
        def loss(out, target):
            return out[0].float().mean()
    return Built(module, tuple(inputs), torch.zeros(()), loss, tuple(float_inputs), settings)


def _fits(cls, config, name: str) -> None:
    """ModelSkipped, with the memory it needs, for a model whose fp32 weights alone would not fit in
    the device's memory (counted on the meta device, before anything is allocated)."""
    import torch

    with torch.device("meta"):
        params = sum(p.numel() for p in cls(config).parameters())
    need = params * 4  # fp32 weights (bf16 autocast computes in bf16, the weights stay fp32)
    if torch.cuda.is_available():
        have, where = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory, "the GPU"
    else:
        import os

        have, where = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this host"
    if need > 0.9 * have:
        raise ModelSkipped(f"{name}: {params / 1e9:.1f}B parameters need {need / 2**30:.0f} GiB for fp32 weights "
                           f"alone, {where} has {have / 2**30:.0f} GiB: run it reduced (num_hidden_layers=...)")


def _labels(name: str, config, batch_size: int, named: dict) -> dict:
    """Labels for the head the class has (none for a base model): token labels shaped as the decoder's
    ids where there is a decoder, else as the input ids."""
    import torch

    classes = int(getattr(config, "num_labels", 2) or 2)
    ids = named.get("decoder_input_ids", named.get("input_ids"))
    inputs = list(named.values())
    if name.endswith(TOKEN_LABELS) and ids is not None:
        return {"labels": torch.randint(0, int(config.vocab_size), tuple(ids.shape))}
    if name.endswith(("ForSequenceClassification", "ForImageClassification")):
        return {"labels": torch.randint(0, classes, (batch_size,))}
    if name.endswith("ForTokenClassification"):
        return {"labels": torch.randint(0, classes, tuple(inputs[0].shape))}
    if name.endswith("ForQuestionAnswering"):
        seq = inputs[0].shape[1]
        return {"start_positions": torch.randint(0, seq, (batch_size,)),
                "end_positions": torch.randint(0, seq, (batch_size,))}
    return {}


def _step_class():
    import torch

    class Step(torch.nn.Module):
        """Calls the model with its inputs by name; returns (loss, logits) or (first output,)."""

        def __init__(self, model, names):
            super().__init__()
            self.model, self.names = model, names

        def forward(self, *xs):
            out = self.model(**dict(zip(self.names, xs)))
            first = getattr(out, "logits", None)
            if first is None:
                first = out.to_tuple()[0] if hasattr(out, "to_tuple") else out[0]
            loss = getattr(out, "loss", None)
            return (loss, first) if loss is not None else (first,)
    return Step


def Step(model, names):  # noqa: N802 (a class made on first use: this module must import without torch)
    return _step_class()(model, names)
