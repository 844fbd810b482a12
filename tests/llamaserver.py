"""llama.cpp's OpenAI-compatible HTTP server serving the embedded GGUF, in a process of its own.

    python tests/llamaserver.py DATA_DIR API_KEY [MAX_TOKENS]

Prints the listening address (``http://127.0.0.1:PORT``) on one line once the model is
loaded, then serves until stdin closes or the process is killed. The parameters are the
embedded provider's (``pipeline.model.local.provider.server_params``): the same runtime, the same
weights, reached over HTTP as any ``openai/…`` server would be. A process of its own so
that a test can stop it mid-run, as an operator's server stops.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    data_dir, api_key = Path(sys.argv[1]), sys.argv[2]
    max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else -1
    import xllamacpp

    from pipeline.model.local.assets import model_path
    from pipeline.model.local.provider import server_params

    server = xllamacpp.Server(server_params(model_path(data_dir), api_key=api_key, max_tokens=max_tokens))
    print(server.listening_address, flush=True)
    sys.stdin.read()  # until the test closes our stdin (or kills us)
    del server


if __name__ == "__main__":
    main()
