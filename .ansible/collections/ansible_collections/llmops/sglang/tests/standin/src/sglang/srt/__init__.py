"""`sglang.srt` of the test stand-in: only the parser entry point (`sglang.srt.server_args`)."""
