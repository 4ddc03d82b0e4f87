"""`python -m sglang.launch_server ...`, as in SGLang 0.5.23 (test stand-in).

0.5.23 `launch_server.py:70-86`: a UserWarning recommending `sglang serve`, then prepare_server_args(sys.argv[1:])
(argparse prog `sglang serve`, also here) and the server.
"""
import sys
import warnings

from sglang_standin.server import main

if __name__ == "__main__":
    warnings.warn(
        "'python -m sglang.launch_server' is still supported, but "
        "'sglang serve' is the recommended entrypoint.\n"
        "  Example: sglang serve --model-path <model> [options]",
        UserWarning,
        stacklevel=1,
    )
    sys.exit(main(sys.argv[1:]))
