-- The album (Telegram media group) a message came in, so that after a restart a photo of an
-- album redelivered by the platform joins its album's turn, or is not answered on its own
-- when the album was answered already.
ALTER TABLE messages ADD COLUMN album TEXT;
CREATE INDEX messages_by_album ON messages (album) WHERE album IS NOT NULL;
