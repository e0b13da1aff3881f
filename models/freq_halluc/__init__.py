"""halluc.freq_attention: contextual hallucination detection from frequency-aware attention."""
