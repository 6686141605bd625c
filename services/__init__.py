"""Services: what the apps ask to be done, above the model library.

- :mod:`services.lab`: the labs' job queue (submit, dispatch, cancel, delete with the checkpoint, save an uploaded
  corpus, the supervisor that resumes queued runs), presets and the views of runs the pages draw.

Layers (docs/layout.md): ``app`` → ``services`` → ``models`` → ``analysis`` → ``core``; a service may import
any layer below it, and nothing below imports a service.
"""
