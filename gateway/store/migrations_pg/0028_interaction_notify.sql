-- A question or approval asked on one node is answered wherever its tap or reply arrives: every
-- interaction asked or closed notifies the other nodes (payload: its id), so the node whose turn
-- waits wakes at once and every node knows which chats have a question open.
CREATE FUNCTION talon_interaction_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('talon_interactions', NEW.id);
    RETURN NULL;
END
$$;
CREATE TRIGGER interactions_notify AFTER INSERT OR UPDATE OF state ON interactions
    FOR EACH ROW EXECUTE FUNCTION talon_interaction_notify();
