"""What scores: backends (ONNX Runtime, PyTorch), tokenization, the engine, sessions, and model build and load."""
