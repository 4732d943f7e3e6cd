"""Chat history: where signed-in users' chats are kept, and how a chat is resumed.

The data layer is Chainlit's SQLAlchemy layer with every id checked (``data_layer``); its
tables are created by ``schema``. A resumed chat becomes the model's history again through
the handler ``resume`` (``setup.register``). ``reach`` checks the database server before
anything else loads, without Chainlit.
"""
