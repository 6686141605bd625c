"""Model-free analyses of BERT Family Explorer (no torch, no streamlit)."""
