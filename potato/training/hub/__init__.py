"""Publishing a run's model to the Hugging Face Hub: the client, the job, its page and
routes, the model card.
"""
