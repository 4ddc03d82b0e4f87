"""`python -m sglang.launch_server ...`, as in SGLang 0.5.23 (test stand-in)."""
import sys

from sglang_standin.server import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="launch_server.py"))
