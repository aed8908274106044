"""Numbers: 16-bit floats and mixed precision (`number_formats`, `mixed_precision`), and
quantization after and during training (`quantization`, `quantized_mlp`)."""
