"""Logic of the SGLang 0.5.23 stand-in used by the llmops.sglang collection's tests."""
VERSION = "0.5.23+standin"
# What the stand-in reports where SGLang reports its own version (/server_info, /get_server_info).
SGLANG_VERSION = "0.5.23"
