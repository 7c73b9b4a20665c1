"""Hugging Face models by name, from configs shipped with the project: `hf:<name>` where the name is one
of PyTorch's Hugging Face list that is not a transformers class (its harness builds them from a hub
config: AllenaiLongformerBase, CamemBert, ...) or a hub id the list names (meta-llama/Llama-3.2-1B, ...).

Nothing is downloaded: each entry is the model class and the numbers of the model's published
config.json (the hub repository named in `source`) that differ from the config class's defaults; the
weights are random, as for every `hf:` model. Options still apply on top (`hf:Qwen/Qwen3-0.6B:seq_len=128`);
one that lowers the layer count (`num_hidden_layers=`, `n_layer=`, `num_layers=`) makes a *reduced*
model, which the suite table names (collector.record.contract.REDUCE_KEYS). Where a model's checkpoint holds more than a causal
language model (gemma-3-4b-it's SigLIP vision tower), `note` says what is left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Named:
    cls: str  # the transformers class built
    source: str  # the hub repository whose config.json the numbers come from
    config: dict = field(default_factory=dict)  # its fields that differ from the config class's defaults
    note: str = ""  # what of the published model is not built



NAMED = {
    # PyTorch's list: names its harness maps to a hub config (benchmarks/dynamo/huggingface.py EXTRA_MODELS)
    "AllenaiLongformerBase": Named("LongformerForMaskedLM", "allenai/longformer-base-4096", {
        "attention_window": 512, "vocab_size": 50265, "max_position_embeddings": 4098, "type_vocab_size": 1,
        "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}),
    "CamemBert": Named("CamembertForMaskedLM", "camembert-base", {
        "vocab_size": 32005, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1,
        "bos_token_id": 5, "eos_token_id": 6}),
    "DistillGPT2": Named("GPT2LMHeadModel", "distilgpt2", {"n_layer": 6}),
    "GoogleFnet": Named("FNetForMaskedLM", "google/fnet-base", {}),  # FNetConfig's defaults are fnet-base's
    "T5Small": Named("T5ForConditionalGeneration", "t5-small", {}),  # T5Config's defaults are t5-small's
    "YituTechConvBert": Named("ConvBertForMaskedLM", "YituTech/conv-bert-base", {}),  # ConvBertConfig's defaults
    # the models users run today, by hub id
    "meta-llama/Llama-3.2-1B": Named("LlamaForCausalLM", "meta-llama/Llama-3.2-1B", {
        "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "bos_token_id": 128000, "eos_token_id": 128001,
        "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}),
    "google/gemma-2-2b": Named("Gemma2ForCausalLM", "google/gemma-2-2b", {
        "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
        "query_pre_attn_scalar": 256, "sliding_window": 4096, "final_logit_softcapping": 30.0,
        "attn_logit_softcapping": 50.0, "rms_norm_eps": 1e-6, "rope_theta": 10000.0}),
    "google/gemma-3-4b-it": Named("Gemma3ForCausalLM", "google/gemma-3-4b-it (its text_config)", {
        "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208, "max_position_embeddings": 131072,
        "query_pre_attn_scalar": 256, "sliding_window": 1024, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
        note="the language model only: the checkpoint's SigLIP vision tower and projector are not built"),
    "openai/whisper-tiny": Named("WhisperForConditionalGeneration", "openai/whisper-tiny", {
        "d_model": 384, "encoder_layers": 4, "decoder_layers": 4, "encoder_attention_heads": 6,
        "decoder_attention_heads": 6, "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536, "vocab_size": 51865,
        "num_mel_bins": 80, "max_source_positions": 1500, "max_target_positions": 448}),
    "Qwen/Qwen3-0.6B": Named("Qwen3ForCausalLM", "Qwen/Qwen3-0.6B", {
        "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True}),
    "mistralai/Mistral-7B-Instruct-v0.3": Named("MistralForCausalLM", "mistralai/Mistral-7B-Instruct-v0.3", {
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 32768, "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": None}),
    "openai/gpt-oss-20b": Named("GptOssForCausalLM", "openai/gpt-oss-20b", {
        "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32, "num_experts_per_tok": 4,
        "vocab_size": 201088, "max_position_embeddings": 131072, "sliding_window": 128, "rope_theta": 150000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "original_max_position_embeddings": 4096, "truncate": False}},
        note="bf16 weights as every model here: the checkpoint's MXFP4 experts are not used"),
}

