import { describe, expect, it } from 'vitest';
import { parseTwiml, TwimlError } from '../../src/sim/twiml.js';
import { connectStreamTwiml, dialTwiml, rejectTwiml } from '../../src/telephony/twilio/twiml.js';

describe('the stand-in\'s TwiML reader', () => {
  it('reads what Switchboard answers: <Connect><Stream> with parameters, escaped', () => {
    const response = parseTwiml(connectStreamTwiml('wss://sb.example/telephony/twilio/media?a=1&b=2', { token: 'x"y&z', call_id: 'c-1' }));
    const connect = response.children[0]!;
    expect(connect.name).toBe('Connect');
    const stream = connect.children[0]!;
    expect(stream.attributes.url).toBe('wss://sb.example/telephony/twilio/media?a=1&b=2');
    expect(stream.children.map((p) => [p.attributes.name, p.attributes.value])).toEqual([
      ['token', 'x"y&z'],
      ['call_id', 'c-1'],
    ]);
    expect(parseTwiml(rejectTwiml()).children[0]).toMatchObject({ name: 'Reject', attributes: { reason: 'rejected' } });
    expect(parseTwiml(dialTwiml('+14155550123', '+14155550100')).children[0]).toMatchObject({
      name: 'Dial',
      text: '+14155550123',
      attributes: { callerId: '+14155550100' },
    });
  });

  it('decodes text, skips comments and declarations, keeps verb order', () => {
    const response = parseTwiml(`<?xml version="1.0"?>
      <!-- a comment -->
      <Response>
        <Say voice='alice'>Tom &amp; Jerry &#233;&#x21;</Say>
        <Pause length="2"/>
        <Dial><Number>+14155550123</Number></Dial>
      </Response>`);
    expect(response.children.map((c) => c.name)).toEqual(['Say', 'Pause', 'Dial']);
    expect(response.children[0]).toMatchObject({ text: 'Tom & Jerry é!', attributes: { voice: 'alice' } });
    expect(response.children[2]!.children[0]!.text).toBe('+14155550123');
  });

  it('leaves an entity it does not know as written, whatever its name', () => {
    const response = parseTwiml('<Response><Say>&constructor; &toString; &nbsp; &lt;</Say></Response>');
    expect(response.children[0]!.text).toBe('&constructor; &toString; &nbsp; <');
  });

  it('refuses what is not TwiML', () => {
    expect(() => parseTwiml('hello')).toThrow(TwimlError);
    expect(() => parseTwiml('<Response><Say>hi</Response>')).toThrow('</Response> closes <Say>');
    expect(() => parseTwiml('<Response><Hangup/>')).toThrow('<Response> is not closed');
    expect(() => parseTwiml('<Other/>')).toThrow('one <Response>');
  });
});
