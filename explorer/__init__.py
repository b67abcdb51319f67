"""The web app's logic, between the `transformer` package and the Gradio layout in app.py:
which checkpoints are served (registry), what a request runs (session), what each view draws (render)."""
