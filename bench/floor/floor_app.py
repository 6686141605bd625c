"""The floor for bench/startup.py: a bare Streamlit page with one small plotly scatter."""

import plotly.express as px
import streamlit as st

st.title("Floor")
st.plotly_chart(px.scatter(x=[1, 2, 3, 4], y=[3, 1, 2, 4]))
