"""A deterministic tiny "model": token ids from the scheduler, text and reasoning split in the main process.

The scheduler (rank 0) produces token ids; the main process detokenizes them and, with `--reasoning-parser`,
splits the text at the end-of-thinking token like SGLang's reasoning parsers do.
"""
import hashlib

VOCAB = ["OK", ".", " The", " answer", " is", " simple", ",", " yes", " and", " it", " works", " well", " here",
         " capital", " Paris", " of", " France", " a", " test", " reply", " from", " the", " stand", "-in", " model",
         " server", " ready", " to", " roll", "!", " Sure", " thing"]
THINK_END = len(VOCAB)        # "</think>"
EOS = len(VOCAB) + 1          # end of sequence
THINK_WORDS = [" The", " user", " asks", " for", " a", " short", " reply", ".", " I", " will", " answer", " briefly", "."]
REASONING_TOKENS = len(THINK_WORDS)
ANSWER_TOKENS = 6


def count_prompt_tokens(text):
    return max(1, len(text.split()))


def chat_prompt(messages):
    """The text a chat template would render, and its token count (a few tokens of template per message)."""
    parts = []
    for message in messages or []:
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        parts.append("%s: %s" % (message.get("role", "user"), content or ""))
    text = "\n".join(parts)
    return text, count_prompt_tokens(text) + 3 * len(parts) + 2


def generate_ids(prompt, max_tokens, thinking, ignore_eos=False, shift=None):
    """The model's output ids for `prompt`, cut at max_tokens (finish 'length') or ended by EOS (finish 'stop').

    With `ignore_eos` (a sampling parameter of 0.5.23, entrypoints/openai/protocol.py:407,1012) the answer goes on
    past its natural end until max_tokens, as a real model does: how tests make generations of any length.
    `shift` (the answer_shift fault, an int >= 1) salts the seed: other answer tokens, the same lengths, the same
    reasoning section and first token (only the seed picks tokens)."""
    salted = prompt if not shift else "answer_shift=%d\n%s" % (shift, prompt)
    seed = int(hashlib.sha256(salted.encode("utf-8")).hexdigest(), 16)
    ids = []
    if thinking:
        ids.extend(range(1000, 1000 + REASONING_TOKENS))  # ids of THINK_WORDS
        ids.append(THINK_END)
    answer = ANSWER_TOKENS
    if ignore_eos and max_tokens:
        answer = max(answer, max_tokens - len(ids))
    for i in range(answer):
        ids.append((seed >> (5 * (i % 50))) % len(VOCAB) if i else 0)
    if ignore_eos and max_tokens:
        return ids[:max_tokens], "length"
    ids.append(EOS)
    if max_tokens is not None and max_tokens < len(ids):
        return ids[:max_tokens], "length"
    return ids[:-1], "stop"


def counted(ids, finish):
    """usage.completion_tokens of a generation: 0.5.23 counts the end-of-sequence token that stopped it
    (schedule_batch.py:1872-1875 finished_len includes it, :1509-1513 output_ids_through_stop,
    scheduler_components/output_streamer.py:490,522-525 completion_tokens = its length); `ids` here stop before it."""
    return len(ids) + (1 if finish == "stop" else 0)


def token_text(token):
    if token == THINK_END:
        return "</think>"
    if token == EOS:
        return ""
    if token >= 1000:
        return THINK_WORDS[token - 1000]
    return VOCAB[token]


def detokenize(ids):
    return "".join(token_text(token) for token in ids)


def split_reasoning(ids):
    """(reasoning_content or None, content or None) as SGLang's kimi_k2 / deepseek-r1 parsers return them."""
    if THINK_END in ids:
        cut = ids.index(THINK_END)
        reasoning, content = detokenize(ids[:cut]), detokenize(ids[cut + 1:])
    elif ids and ids[0] >= 1000:
        reasoning, content = detokenize(ids), ""  # cut off while still thinking
    else:
        reasoning, content = "", detokenize(ids)
    return (reasoning.strip() or None), (content.strip() or None)
