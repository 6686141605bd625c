"""Streamlit front end of BERT Family Explorer: the entry point, its pages and shared UI helpers."""
